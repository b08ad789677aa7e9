"""What the front ends show, built from read-model rows and run results: response shapes, report texts, a run's
full result. Pure: nothing here reads the database or publishes."""

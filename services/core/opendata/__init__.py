"""The open data set: ranked submissions as Parquet or JSON Lines, and their upload to the Hugging Face Hub."""

"""Problem sets: archives, the sync plan from a problem directory to leaderboard events, and their reads."""

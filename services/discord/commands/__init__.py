"""The bot's slash commands: every one is a row of `table`, whose handler lives in a module named for its purpose."""

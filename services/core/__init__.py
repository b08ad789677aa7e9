"""The shared core: what more than one front end (gateway, Discord bot, dispatcher, operator CLI) needs, in rooms by
kind (docs/architecture.md, "services/core rooms"). It imports schemas, runner's pure libraries, services.kit and
services.ranking, never a service."""

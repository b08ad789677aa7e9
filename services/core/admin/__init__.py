"""Admin use cases both front ends offer (dev boards, intake and bans, the pre-check review) and the admin reads."""

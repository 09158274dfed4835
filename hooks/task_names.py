"""The names of the webhooks' tasks, which the settings' beat schedule uses and which
import nothing (the settings are read before Django is set up)."""

DELIVER_TASK = "hooks.tasks.deliver"
PRUNE_TASK = "hooks.tasks.prune"

"""The names of the credentials' tasks, which the settings' beat schedule uses and which
import nothing (the settings are read before Django is set up)."""

TOKENS_EXPIRE_TASK = "access.tasks.tokens_expire"

"""Constants the LM tests share: fast retries and the secret that must never leak."""

from imp.models.retry import RetryPolicy

FAST_RETRIES = RetryPolicy(max_retries=2, initial_backoff=0.001, max_backoff=0.005, jitter=0.0)
SECRET = "sk-test-abcdefghijklmnopqrstuvwx0123456789"

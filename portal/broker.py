"""The Celery broker transport: kombu's Redis transport, made to survive a broker outage.

Why this exists: a worker exited with ``CRITICAL Unrecoverable error:
AttributeError("'NoneType' object has no attribute 'hostname'")`` when Redis went away while
the worker held a message it had not acknowledged yet (a running ``acks_late`` task, or a
prefetched one). Reproduced with celery 5.7.0 and kombu 5.7.0, and not cured by any
setting; the sequence, in kombu:

1. The consumer loses the connection and ``Consumer.on_connection_error_after_connected``
   calls ``Connection.collect()``. Closing the consumer's channel there raises a connection
   error (its BRPOP cannot be read), which ``collect`` swallows, leaving the channel open;
   ``collect`` then detaches the transport: ``transport.client = None``.
2. The consumer then calls ``Connection.close()``, which closes that channel again. The
   virtual channel's close puts the unacknowledged messages back (``restore_unacked``),
   which asks for a fresh Redis connection pool, whose parameters are read from
   ``transport.client``, now None: ``_connparams`` raises AttributeError. ``ignore_errors``
   only swallows connection errors, so the AttributeError escapes the consumer's restart
   loop and the worker stops.

Here a channel whose transport was detached answers with a connection error instead, which
every cleanup path already expects. Nothing is lost by not restoring through it: the
messages stay in Redis's unacked index and the transport's visibility timeout
(``CELERY_BROKER_TRANSPORT_OPTIONS``) delivers them again, as it does for a worker that was
killed. Chosen by the ``broker_transport`` setting (``CELERY_BROKER_TRANSPORT``).
"""

from __future__ import annotations

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict:
        """The pool's parameters; a connection error once the connection was closed."""
        if self.connection.client is None:
            raise redis.ConnectionError(
                "the broker connection was closed; unacknowledged messages are delivered "
                "again after the visibility timeout"
            )
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel

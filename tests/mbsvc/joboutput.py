# Turns a managed job's raw output into events (§5.2, §5.4, §8-1): a shared
# sequence for both streams, UTF-8 decoding per stream with U+FFFD, chunks of
# at most 8192 UTF-16 units that never split a surrogate pair, the 1 MiB byte
# cap, and at most 512 events: the first ones go out immediately, later
# output is batched so the remaining byte allowance always fits the budget.

import codecs
import time

from . import config

PIECE = config.MAX_CHUNK_UNITS - 4     # raw bytes per decode; +3 carried bytes stays <= 8192 units
BATCH_AGE = 1.0                         # seconds a partial batch may wait while budget allows


def split_units(text, limit=config.MAX_CHUNK_UNITS):
    """Split text into pieces of at most `limit` UTF-16 code units, never inside a pair."""
    out, cur, units = [], [], 0
    for ch in text:
        n = 2 if ord(ch) > 0xFFFF else 1
        if units + n > limit:
            out.append("".join(cur))
            cur, units = [], 0
        cur.append(ch)
        units += n
    if cur:
        out.append("".join(cur))
    return out


class Output:
    """Owned by the job's pump thread; appends events via job.append_event()."""

    def __init__(self, job):
        self.job = job
        self.decoders = {}
        self.batch = {"stdout": bytearray(), "stderr": bytearray()}
        self.batch_since = {"stdout": None, "stderr": None}

    def _decoder(self, stream):
        if stream not in self.decoders:
            self.decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        return self.decoders[stream]

    def _emit(self, stream, data, final=False):
        text = self._decoder(stream).decode(bytes(data), final)
        for piece in split_units(text):
            if piece:
                self.job.append_event(stream, piece)

    def _budget_left(self):
        """Events we may still spend on partial batches without risking the 512 cap."""
        held = sum(len(b) for b in self.batch.values())
        remaining = config.MAX_OUTPUT_BYTES - self.job.output_bytes + held
        need = -(-remaining // PIECE) + 4
        return config.MAX_EXECUTION_EVENTS - self.job.event_count() - need

    def feed(self, stream, data):
        """Record raw output; returns True when the 1 MiB cap was hit (job must stop)."""
        room = config.MAX_OUTPUT_BYTES - self.job.output_bytes
        hit = False

        if len(data) > room:
            data, hit = data[:room], True
        if not data:
            return hit
        buf = self.batch[stream]
        immediate = not buf and self.job.event_count() < config.IMMEDIATE_EVENTS and self._budget_left() > 0
        self.job.add_output_bytes(len(data))
        if immediate:
            for i in range(0, len(data), PIECE):
                self._emit(stream, data[i:i + PIECE])
            return hit
        if not buf:
            self.batch_since[stream] = time.monotonic()
        buf += data
        while len(buf) >= PIECE:
            self._emit(stream, buf[:PIECE])
            del buf[:PIECE]
            self.batch_since[stream] = time.monotonic() if buf else None
        return hit

    def tick(self):
        """Flush batches that waited long enough, while the event budget allows."""
        now = time.monotonic()
        for stream, buf in self.batch.items():
            since = self.batch_since[stream]
            if buf and since is not None and now - since >= BATCH_AGE and self._budget_left() > 0:
                self._emit(stream, buf)
                buf.clear()
                self.batch_since[stream] = None

    def close(self):
        for stream, buf in self.batch.items():
            self._emit(stream, buf, final=True)
            buf.clear()

# Turns a managed job's raw output into events (§5.2, §5.4, §8-1): a shared
# sequence for both streams, UTF-8 decoding per stream with U+FFFD, chunks of
# at most 8192 UTF-16 units that never split a surrogate pair, the 1 MiB byte
# cap. Two policies: "batched" (the newest runtime: the first events go out
# immediately, later output is batched so the byte allowance always fits the 512
# events) and "per-read" (d93e920: every pipe read is an event, and the job stops
# with output_limit after 510 of them however little was printed).

import codecs
import time

from . import config

PIECE = config.MAX_CHUNK_UNITS - 4     # raw bytes per decode; +3 carried bytes stays <= 8192 units
BATCH_AGE = 1.0                         # seconds a partial batch may wait while budget allows
READ_PIECE = 8192                       # per-read: bytes per event, as the runtime slices each read
READ_EVENT_CAP = config.MAX_EXECUTION_EVENTS - 2


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


class PerReadOutput:
    """d93e920: each read is cut into 8192-byte pieces, one event each (an empty
    decode still counts); the 510th piece, or one cut short by the byte cap, stops the job."""

    def __init__(self, job):
        self.job = job
        self.decoders = {}
        self.pieces = 0

    def _decoder(self, stream):
        if stream not in self.decoders:
            self.decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        return self.decoders[stream]

    def feed(self, stream, data):
        """Record one read; returns True when the job must stop with output_limit."""
        for off in range(0, len(data), READ_PIECE):
            want = min(READ_PIECE, len(data) - off)
            piece = data[off:off + min(want, config.MAX_OUTPUT_BYTES - self.job.output_bytes)]
            self.job.add_output_bytes(len(piece))
            text = self._decoder(stream).decode(piece)
            if text:
                self.job.append_event(stream, text)
            self.pieces += 1
            if self.pieces >= READ_EVENT_CAP or len(piece) < want:
                return True
        return False

    def tick(self):
        pass

    def close(self):
        for stream, dec in self.decoders.items():
            text = dec.decode(b"", True)
            if text:
                self.job.append_event(stream, text)


def make_output(job, mode):
    return PerReadOutput(job) if mode == "per-read" else Output(job)

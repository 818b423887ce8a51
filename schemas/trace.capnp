@0xf39a26c467f5c1b4;
# Trace file records: the runtime writes spans of actor messages, stream
# operations and file I/O; pensieve-trace reads them back.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("pensieve::schema");

enum SpanKind {
  message @0;    # an actor handled one mailbox message
  stream @1;     # a stream operation ran (kernel, copy, host function)
  fileIo @2;     # an io_uring read, write or fsync
  iteration @3;  # one scheduler iteration
  request @4;    # a request's lifecycle point
  custom @5;
}

struct Span {
  kind @0 :SpanKind;
  actor @1 :Text;      # actor or stream name
  name @2 :Text;       # message type, operation
  id @3 :UInt64;       # request / conversation / operation id (0 when none)
  startNs @4 :Int64;   # steady clock
  endNs @5 :Int64;
  thread @6 :UInt32;   # recording thread's index
  flowId @7 :UInt64;   # links one request's spans across actors (0 when none)
  detail @8 :Text;     # free-form, e.g. a batch's composition "prefill=3x512 decode=14"
  enqueueNs @9 :Int64; # message spans: when the message was sent (0 when unknown)
}

# What a reader needs besides the spans; written once, in the file's first chunk.
struct TraceHeader {
  # A steady-clock reading and the wall clock (Unix ns) read together: maps
  # span times to wall-clock time.
  clockSteadyNs @0 :Int64;
  clockWallNs @1 :Int64;
  startSteadyNs @2 :Int64;       # when recording was last enabled (0 when never)
  droppedSpans @3 :UInt64;       # spans lost to full rings since the tracer started
  threadNames @4 :List(Text);    # by recording thread index ("" when unnamed)
}

struct TraceChunk {
  spans @0 :List(Span);
  header @1 :TraceHeader;        # set in the first chunk only
}

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
}

struct TraceChunk {
  spans @0 :List(Span);
}

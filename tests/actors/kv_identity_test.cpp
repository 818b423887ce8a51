// The disk KV tier's chunk identity (actors/model_identity.hpp): which
// layout changes make a previous run's chunks foreign.
#include "actors/model_identity.hpp"

#include <catch2/catch.hpp>

using namespace pensieve;

namespace {

kv::KvPoolConfig pool_of(kv::KvDType dtype) {
  kv::KvPoolConfig c;
  c.block_tokens = 32;
  c.n_layers = 12;
  c.n_kv_heads = 4;
  c.head_dim = 64;
  c.dtype = dtype;
  return c;
}

const actors::JournalModel served{"llama", "M", 0x11, 0x22, 0x33};

}  // namespace

// The literals are the identities kv_identity gave these pools before
// 2026-12-06, when Q8_0 KV was stored in ggml's blocks of 32 values (FNV-1a
// of the same fields, computed independently).
TEST_CASE("a chunk of Q8_0 KV in the 32-value blocks of before is foreign, F16 chunks keep their identity",
          "[disk][q8_0]") {
  CHECK(actors::kv_identity(served, pool_of(kv::KvDType::q8_0)) != 0xf554d27d522c6c91ull);
  CHECK(actors::kv_identity(served, pool_of(kv::KvDType::f16)) == 0x68b9fac20583e37bull);
  CHECK(actors::kv_identity(served, pool_of(kv::KvDType::q8_0)) != actors::kv_identity(served, pool_of(kv::KvDType::f16)));
}

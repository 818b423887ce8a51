#include "gpu/text/tokenizer.hpp"

#include "gpu/text/bpe_tokenizer.hpp"
#include "gpu/text/spm_tokenizer.hpp"
#include "gpu/text/tokenizer_special.hpp"

namespace pensieve::model {

struct Tokenizer::Impl {
  Vocab vocab;
  std::optional<BpeRanks> ranks;  // byte-level BPE only
  PreTokenizer pre = PreTokenizer::gpt2;

  bool spm() const { return vocab.data.kind == TokenizerKind::sentencepiece; }
  void encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const;
};

void Tokenizer::Impl::encode_text(std::string_view text, bool after_special,
                                  std::vector<TokenId>& out) const {
  if (!spm()) {
    bpe_encode(vocab, *ranks, pre, text, out);
    return;
  }
  // llama.cpp adds the SentencePiece space prefix at the start of the text
  // and again after every special token.
  std::string escaped;
  if (vocab.data.add_space_prefix && after_special) escaped.append(spm_space);
  escaped += spm_escape_spaces(text);
  if (!vocab.data.split_at_space_mark) {
    spm_encode(vocab, escaped, out);
    return;
  }
  // Metaspace's split (behavior MergedWithNext): a word ends before each "▁".
  const std::string_view all = escaped;
  for (std::size_t start = 0; start < all.size();) {
    std::size_t next = all.find(spm_space, start + 1);
    if (next == std::string_view::npos) next = all.size();
    spm_encode(vocab, all.substr(start, next - start), out);
    start = next;
  }
}

Result<Tokenizer> Tokenizer::from_data(TokenizerData data) {
  auto impl = std::make_shared<Impl>();
  auto vocab = make_vocab(std::move(data));
  if (!vocab) return vocab.error();
  impl->vocab = std::move(*vocab);
  if (!impl->spm()) {
    auto pre = pre_tokenizer_from_name(impl->vocab.data.pre);
    if (!pre) return pre.error();
    impl->pre = *pre;
    auto ranks = BpeRanks::from_merges(impl->vocab.data.merges);
    if (!ranks) return ranks.error();
    if (ranks->size() == 0) return fail("tokenizer: a byte-level BPE vocabulary without merges");
    impl->ranks = std::move(*ranks);
  }
  return Tokenizer(std::move(impl));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  const Impl& impl = *impl_;
  std::vector<TokenId> out;
  if (options.add_bos && impl.vocab.data.bos_id >= 0) out.push_back(impl.vocab.data.bos_id);
  bool after_special = true;
  for (const TextFragment& fragment : split_special_tokens(impl.vocab, text, options.parse_special)) {
    if (fragment.token) {
      out.push_back(*fragment.token);
      after_special = true;
    } else {
      impl.encode_text(fragment.text, after_special, out);
      after_special = false;
    }
  }
  return out;
}

std::vector<TokenId> Tokenizer::encode_pieces(std::span<const TextPiece> pieces, bool add_bos) const {
  const Impl& impl = *impl_;
  std::vector<TokenId> out;
  if (add_bos && impl.vocab.data.bos_id >= 0) out.push_back(impl.vocab.data.bos_id);
  // Raw text accumulates across pieces until a special token ends the run.
  std::string raw;
  bool after_special = true;
  auto flush = [&] {
    if (raw.empty()) return;
    impl.encode_text(raw, after_special, out);
    after_special = false;
    raw.clear();
  };
  for (const TextPiece& piece : pieces) {
    for (const TextFragment& fragment : split_special_tokens(impl.vocab, piece.text, piece.parse_special)) {
      if (fragment.token) {
        flush();
        out.push_back(*fragment.token);
        after_special = true;
      } else {
        raw += fragment.text;
      }
    }
  }
  flush();
  return out;
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  const Vocab& vocab = impl_->vocab;
  if (!vocab.contains(id)) return {};
  const std::string& text = vocab.piece(id);
  switch (vocab.type(id)) {
    case TokenType::control:
    case TokenType::unknown: return render_special ? text : std::string();
    case TokenType::user_defined: return text;
    case TokenType::byte:
      if (const auto byte = parse_byte_piece(text)) return std::string(1, static_cast<char>(*byte));
      return impl_->spm() ? std::string() : bpe_piece_to_bytes(text);
    case TokenType::normal: {
      if (!impl_->spm()) return bpe_piece_to_bytes(text);
      std::string piece;
      for (std::size_t i = 0; i < text.size();) {
        if (text.compare(i, spm_space.size(), spm_space) == 0) {
          piece.push_back(' ');
          i += spm_space.size();
        } else {
          piece.push_back(text[i++]);
        }
      }
      return piece;
    }
    case TokenType::undefined:
    case TokenType::unused: break;
  }
  return {};
}

std::string Tokenizer::decode(std::span<const TokenId> ids, DecodeOptions options) const {
  std::string text;
  const bool strip = options.strip_leading_space && impl_->spm() && impl_->vocab.data.add_space_prefix;
  const std::size_t first_text = !ids.empty() && ids.front() == impl_->vocab.data.bos_id ? 1 : 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], options.render_special);
    if (strip && i == first_text && !piece.empty() && piece.front() == ' ') piece.erase(0, 1);
    text += piece;
  }
  return text;
}

TokenizerKind Tokenizer::kind() const { return impl_->vocab.data.kind; }
std::size_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }
bool Tokenizer::contains(TokenId id) const { return impl_->vocab.contains(id); }
std::optional<TokenId> Tokenizer::find_piece(std::string_view piece) const {
  return impl_->vocab.find(piece);
}

TokenType Tokenizer::type(TokenId id) const {
  return contains(id) ? impl_->vocab.type(id) : TokenType::undefined;
}

bool Tokenizer::is_control(TokenId id) const { return type(id) == TokenType::control; }

bool Tokenizer::is_special(TokenId id) const {
  const TokenType t = type(id);
  return t == TokenType::control || t == TokenType::unknown;
}

bool Tokenizer::is_end_of_generation(TokenId id) const {
  return id >= 0 && (id == impl_->vocab.data.eos_id || id == impl_->vocab.data.eot_id);
}

namespace {
std::optional<TokenId> optional_id(std::int32_t id) {
  return id >= 0 ? std::optional<TokenId>(id) : std::nullopt;
}
}  // namespace

std::optional<TokenId> Tokenizer::bos_id() const { return optional_id(impl_->vocab.data.bos_id); }
std::optional<TokenId> Tokenizer::eos_id() const { return optional_id(impl_->vocab.data.eos_id); }
std::optional<TokenId> Tokenizer::eot_id() const { return optional_id(impl_->vocab.data.eot_id); }
bool Tokenizer::adds_bos_by_default() const { return impl_->vocab.data.add_bos; }
const std::string& Tokenizer::chat_template() const { return impl_->vocab.data.chat_template; }
const TokenizerData& Tokenizer::data() const { return impl_->vocab.data; }

}  // namespace pensieve::model

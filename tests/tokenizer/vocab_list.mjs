// vocab_list.mjs — a tokenizer.json's vocabulary as the line list tools/gen_vocab_gguf.c reads:
// every token in llama.cpp's converter layout (model tokens NORMAL, added tokens CONTROL or
// USER_DEFINED, ids past the tokenizer [PADn] UNUSED) and, in rank order, the merges "a b" whose
// concatenation occurs in the byte-level text of some case. Any pair BPE can meet while encoding a
// case is a substring of it, so BPE takes the same steps as with the full list while the GGUF stays small.

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
export const byteLevel = (s) => Array.from(Buffer.from(s, 'utf8'), (b) => byteChar[b]).join('');

// header: the metadata lines ('S\tkey\tvalue', ...); returns the list's lines and the merges kept.
export function vocabLines(tj, nVocab, header, cases) {
    const texts = new Array(nVocab).fill(null), types = new Array(nVocab).fill(5);
    for (const [t, id] of Object.entries(tj.model.vocab)) { texts[id] = t; types[id] = 1; }
    for (const a of tj.added_tokens) { texts[a.id] = a.content; types[a.id] = a.special ? 3 : 4; }
    for (let i = 0; i < nVocab; i++) if (texts[i] === null) texts[i] = `[PAD${i}]`;
    const corpus = cases.map(byteLevel);
    const used = tj.model.merges.filter((m) => {
        const [a, b] = Array.isArray(m) ? m : m.split(' ');
        return corpus.some((c) => c.includes(a + b));
    });
    const out = header.slice();
    for (let i = 0; i < nVocab; i++) out.push(`T\t${types[i]}\t${texts[i]}`);
    for (const m of used) out.push(`M\t${Array.isArray(m) ? m.join(' ') : m}`);
    return { lines: out, merges: used.length };
}

// gptoss_corpus.mjs — the texts tokenized by gen_gptoss.mjs: hand-picked cases for each rule of
// the gpt-4o pre-tokenizer (letter case splits, contractions, digit groups, punctuation runs
// with '/' and newlines, whitespace runs), many scripts, emoji, code, special tokens, and
// pseudo-random mixes of all of these (a fixed seed: the file is reproducible).
const hand = [
    // ASCII words, case splits
    'Hello world', ' Hello world', 'Hello, world!', 'HelloWorld', 'helloWorld', 'HELLOworld', 'HTTPServer',
    'iPhone', 'McDonald', 'camelCaseIdentifier', 'snake_case_identifier', 'SCREAMING_SNAKE', 'XMLHttpRequest',
    'a', 'A', 'aB', 'Ab', 'ABc', 'abC', 'I', ' I', 'The quick brown fox jumps over the lazy dog.',
    'THE QUICK BROWN FOX', 'tHe QuIcK bRoWn', 'e.g. i.e. etc.', 'U.S.A.', 'Mr. Smith went to Washington.',
    // contractions
    "don't", "Don't", "DON'T", "I'm", "I'M", "you're", "YOU'RE", "we've", "they'll", "THEY'LL", "she'd",
    "it's", "IT'S", "It'S", "o'clock", "rock'n'roll", "'s", "'tis", "can't won't shouldn't", "I'LL", "x'll",
    "y'all", "ma'am", "'quoted'", "\"double quoted\"", "it’s (curly)", "l'homme d'état",
    // digits
    '0', '7', '42', '123', '1234', '12345', '123456', '1234567', '12345678901234567890', '3.14159',
    '1,000,000', '2024-06-01', '10:30:45', '$1.99', '100%', 'v1.2.3', 'x86_64', 'abc123def', '123abc',
    'Phone: +1 (555) 123-4567', '½ ¾ ² ³', '٣٤٥ ١٢', '१२३४', 'ⅠⅡⅢⅣ', '①②③',
    // punctuation, slashes, newlines
    '!!!', '...', '?!', ' (', ' ((', '()', '[]{}', '<>', '-->', '=>', '::', '//', '/', 'a/b/c',
    'https://example.com/path/to/page?q=1&r=2#frag', 'C:\\Users\\name', '/usr/local/bin/', '.\n\n', '!\r\n',
    '*/\n', 'end./\n', '## Heading\n', '- item\n- item 2\n', '| a | b |\n|---|---|',
    // whitespace runs
    ' ', '  ', '   ', '\t', '\t\t', '\n', '\n\n', '\r\n', '\r\n\r\n', ' \n', '  \n  ', '\n \n', '   Hello',
    'a  b', 'a   b', 'a\tb', 'a \t b', 'trailing   ', '   leading', '  123', ' \u00a0 x', '\u3000full width',
    'x\u2003y', 'line1\nline2\r\nline3\rline4', '\n\n\n\nfoo', 'foo\n\n\n\n', ' \t\n \t\n x',
    // scripts
    '你好，世界！', '我爱北京天安门。', '中文ABC', 'ABC中文', '中文abc', 'abc中文', '日本語のテキストです。',
    'カタカナとひらがな', '한국어 텍스트입니다', '안녕하세요', 'Привет, мир!', 'ПРИВЕТмир', 'приветМир',
    'Αθήνα', 'ΑθήναΑθήνα', 'ΑΘΉΝΑ', 'Ελληνικά γράμματα', 'مرحبا بالعالم', 'שלום עולם', 'नमस्ते दुनिया',
    'हिन्दी भाषा', 'สวัสดีชาวโลก', 'ภาษาไทย', 'Tiếng Việt có dấu', 'Đà Nẵng', 'Ǆemal ǅemal ǆemal',
    'ǈubljana', 'Straße', 'STRASSE', 'ÆØÅæøå', 'Ñandú', 'façade', 'naïve café', 'résumé',
    're\u0301sume\u0301', 'e\u0301', '\u0301abc', '\u0301ABC', 'A\u0301B', 'ABC\u0301', 'ᴬᴮᶜ', 'ʰello',
    'ქართული', 'Հայերեն', 'አማርኛ', 'தமிழ்', 'বাংলা', 'ꯃꯤꯇꯩ', '𝐇𝐞𝐥𝐥𝐨', '𝕳𝖊𝖑𝖑𝖔', 'Ｆｕｌｌｗｉｄｔｈ',
    // emoji
    '😀', '😀😀😀', 'Hi 👋', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇺🇸🇫🇷', '❤️', '✨new✨', 'I ❤ NY', '🤖: beep',
    '1️⃣ 2️⃣', '😀abc', 'abc😀', ' 😀 ', '👍👍 great',
    // code
    'def foo(x):\n    return x + 1\n', 'int main(void) {\n\treturn 0;\n}\n', 'for (i = 0; i < n; i++) {}',
    'console.log("hi");', '#include <stdio.h>', 'SELECT * FROM users WHERE id = 42;', '{"key": "value", "n": 123}',
    '<div class="x">text</div>', 'x ** 2 + y ** 2 == r ** 2', 'a += b; c -= d;', '    indented\n        more',
    '$ ls -la /tmp', '```python\nprint(1)\n```', 'λx.x', '∀x∈ℝ: x²≥0', '∑_{i=1}^{n} i', 'E = mc²',
    // special tokens
    '<|start|>user<|message|>hi<|end|>', '<|start|>assistant<|channel|>final<|message|>ok<|return|>',
    '<|channel|>analysis<|message|>think<|end|>', 'to=functions.get<|constrain|>json<|message|>{}<|call|>',
    '<|endoftext|>', 'a<|endoftext|>b', '<|startoftext|>x', '<|endofprompt|>', '<|reserved_200000|>',
    '<|start|><|start|>', 'text <|end|> more', '<|start|', '|>', '<|notatoken|>', '<|end|>\n\n<|start|>',
    // long
    'In the beginning God created the heaven and the earth. And the earth was without form, and void; and ' +
        'darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.',
    'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et ' +
        'dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut.',
];

// Pseudo-random mixes (xorshift32, fixed seed) of fragments from every class above.
const pieces = ['the', 'The', 'THE', 'Hello', 'wORLD', "'s", "'LL", "'re", ' ', '  ', '\t', '\n', '\r\n',
    '\n\n', '1', '22', '333', '4444', '55555', '.', ',', '!', '?', '/', '//', '(', ')', '{', '}', '"', "'", '-',
    '_', '中', '文', '日本', 'カ', '한', 'Привет', 'мир', 'Α', 'θήνα', 'ß', 'é', '\u0301', '\u0308', 'ǅ',
    'नम', 'स्ते', 'ไทย', 'مرحبا', '😀', '👍🏽', '🇫🇷', '❤️', '½', '²', '٣', '\u00a0', '\u3000', '<|end|>',
    '<|start|>', '<|message|>', 'x', 'Y', 'z9', 'Q', 'über', 'ÜBER', '$', '%', '#', '@', '=', '+', '*'];
let seed = 0x9e3779b9;
const rnd = (n) => {
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed % n;
};
const mixes = [];
for (let i = 0; i < 160; i++) {
    let s = '';
    const k = 2 + rnd(14);
    for (let j = 0; j < k; j++) s += pieces[rnd(pieces.length)];
    mixes.push(s);
}

export const cases = [...hand, ...mixes];

// gen.mjs — expected renders of the real chat templates in templates/ over generated
// conversations, made by an independent engine (@huggingface/jinja), for tests/test_jinja.c.
//
//   npm install --prefix /tmp/hfjinja @huggingface/jinja@0.5.11
//   HF_JINJA=/tmp/hfjinja/node_modules/@huggingface/jinja/dist/index.js node tests/jinja/gen.mjs
//
// Writes conversations.jsonl (one conversation per line: messages, tools, add_generation_prompt,
// enable_thinking, kwargs) and expected/<template>.jsonl (one line per conversation: the
// sha256 and length of the render, the render itself for the first FULL_TEXT conversations,
// or "error" when the template raises). The same seed gives the same files.
//
// Where @huggingface/jinja differs from Python's Jinja, which transformers uses, the expected
// render follows Python: the library is loaded with these functions replaced (PY_PATCHES):
//   - str.strip/lstrip/rstrip(chars) strip only `chars` (the library ignores the argument);
//   - |trim and strip() without arguments strip Python's whitespace set (str.isspace), not JS's;
//   - True/False/None print as Python does ("True", not "true"; "None", not "null"), also in
//     |string and ~;
//   - a list or dict prints as Python's repr (['a', 1]), not as JSON, also in |string;
//   - "\r\n" line endings in the template read as "\n" (Jinja normalises newlines);
//   - == and != compare by value as Python does (two equal dicts are equal; 1 != "1").
// A render where the unpatched library gives a different result is marked "hf_differs": true.
import { readFileSync, writeFileSync, mkdirSync, readdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

process.env.TZ = "UTC";
const NOW = new Date(Date.UTC(2026, 0, 27, 9, 30, 0)); // what strftime_now formats
const HERE = dirname(fileURLToPath(import.meta.url));
const LIB = process.env.HF_JINJA;
if (!LIB) throw new Error("set HF_JINJA to @huggingface/jinja's dist/index.js");
const N_CONV = 320;
const FULL_TEXT = 16;

// ---- the library, plain and with Python semantics --------------------------------------
const PY_HELPERS = `
const PY_WS = " \\t\\n\\v\\f\\r\\x1c\\x1d\\x1e\\x1f\\x85\\xa0\\u1680\\u2000\\u2001\\u2002\\u2003\\u2004\\u2005\\u2006\\u2007\\u2008\\u2009\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
function pyStrip(s, args, left, right) {
  const a = args && args[0];
  const set = a && a.type === "StringValue" ? [...a.value] : [...PY_WS];
  const cps = [...s];
  let b = 0, e = cps.length;
  while (left && b < e && set.includes(cps[b])) b++;
  while (right && e > b && set.includes(cps[e - 1])) e--;
  return cps.slice(b, e).join("");
}
function pyEq(a, b) {
  const num = (x) => x.type === "IntegerValue" || x.type === "FloatValue" || x.type === "BooleanValue";
  if (num(a) && num(b)) return Number(a.value) === Number(b.value);
  const seq = (x) => x.type === "ArrayValue" || x.type === "TupleValue";
  if (seq(a) && seq(b)) return a.value.length === b.value.length && a.value.every((x, i) => pyEq(x, b.value[i]));
  const map = (x) => x.type === "ObjectValue" || x.type === "KeywordArgumentsValue";
  if (map(a) && map(b)) {
    if (a.value.size !== b.value.size) return false;
    for (const [k, x] of a.value) if (!b.value.has(k) || !pyEq(x, b.value.get(k))) return false;
    return true;
  }
  if (a.type !== b.type) return false;
  return a.type === "NullValue" || a.type === "UndefinedValue" || a.value === b.value;
}
function pyRepr(v) {
  switch (v.type) {
    case "StringValue": {
      const q = v.value.includes("'") && !v.value.includes('"') ? '"' : "'";
      let out = q;
      for (const ch of v.value) {
        if (ch === q || ch === "\\\\") out += "\\\\" + ch;
        else if (ch === "\\n") out += "\\\\n";
        else if (ch === "\\r") out += "\\\\r";
        else if (ch === "\\t") out += "\\\\t";
        else if (ch.charCodeAt(0) < 0x20 || ch === "\\x7f") out += "\\\\x" + ch.charCodeAt(0).toString(16).padStart(2, "0");
        else out += ch;
      }
      return out + q;
    }
    case "ArrayValue": return "[" + v.value.map(pyRepr).join(", ") + "]";
    case "TupleValue": return "(" + v.value.map(pyRepr).join(", ") + (v.value.length === 1 ? ",)" : ")");
    case "ObjectValue": case "KeywordArgumentsValue":
      return "{" + Array.from(v.value.entries()).map(([k, x]) => pyRepr(new StringValue(k)) + ": " + pyRepr(x)).join(", ") + "}";
    case "BooleanValue": return v.value ? "True" : "False";
    case "NullValue": return "None";
    default: return v.toString();
  }
}
`;
const PY_PATCHES = [
  ['"strip",\n        new FunctionValue(() => {\n          return new StringValue(this.value.trim());',
   '"strip",\n        new FunctionValue((args) => {\n          return new StringValue(pyStrip(this.value, args, true, true));'],
  ['"rstrip",\n        new FunctionValue(() => {\n          return new StringValue(this.value.trimEnd());',
   '"rstrip",\n        new FunctionValue((args) => {\n          return new StringValue(pyStrip(this.value, args, false, true));'],
  ['"lstrip",\n        new FunctionValue(() => {\n          return new StringValue(this.value.trimStart());',
   '"lstrip",\n        new FunctionValue((args) => {\n          return new StringValue(pyStrip(this.value, args, true, false));'],
  ['case "trim":\n            return new StringValue(operand.value.trim());',
   'case "trim":\n            return new StringValue(pyStrip(operand.value, null, true, true));'],
  ['var BooleanValue = class extends RuntimeValue {\n  type = "BooleanValue";\n',
   'var BooleanValue = class extends RuntimeValue {\n  type = "BooleanValue";\n  toString() { return this.value ? "True" : "False"; }\n'],
  ['var NullValue = class extends RuntimeValue {\n  type = "NullValue";\n',
   'var NullValue = class extends RuntimeValue {\n  type = "NullValue";\n  toString() { return "None"; }\n'],
  ['case "string":\n            return new StringValue(operand.value ? "true" : "false");',
   'case "string":\n            return new StringValue(operand.value ? "True" : "False");'],
  ['case "string":\n            return new StringValue(toJSON(operand, {}, 0, false));',
   'case "string":\n            return new StringValue(pyRepr(operand));'],
  // == and != compare values as Python does (dicts and lists by content, 1 != "1", None != undefined)
  ['case "==":\n        return new BooleanValue(left.value == right.value);\n      case "!=":\n        return new BooleanValue(left.value != right.value);',
   'case "==":\n        return new BooleanValue(pyEq(left, right));\n      case "!=":\n        return new BooleanValue(!pyEq(left, right));'],
  // Jinja reads the source by lines: "\r\n" and "\r" are "\n" before anything else
  ['function preprocess(template, options = {}) {\n', 'function preprocess(template, options = {}) {\n  template = template.replace(/\\r\\n?/g, "\\n");\n'],
  // ObjectValue, NamespaceValue, ArrayValue print through toJSON(this, {}, 0, false)
  ['  toString() {\n    return toJSON(this, {}, 0, false);\n  }', '  toString() {\n    return pyRepr(this);\n  }', "all"],
];

async function loadLib(patched) {
  let src = readFileSync(LIB, "utf8");
  // strftime_now formats a fixed instant (the tests render with the same one, TZ=UTC).
  const NOW_FROM = "return strftime(/* @__PURE__ */ new Date(), format2);";
  if (!src.includes(NOW_FROM)) throw new Error("strftime_now not found (library version?)");
  src = src.replace(NOW_FROM, `return strftime(new Date(${NOW.getTime()}), format2);`);
  if (patched) {
    for (const [from, to, all] of PY_PATCHES) {
      if (!src.includes(from)) throw new Error("patch does not apply (library version?): " + from.slice(0, 60));
      src = all ? src.split(from).join(to) : src.replace(from, to);
    }
    src = src.replace("// src/runtime.ts", PY_HELPERS + "\n// src/runtime.ts");
  }
  const dir = join(HERE, "..", "..", "build", "jinja-gen");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, patched ? "hf-jinja-python.mjs" : "hf-jinja-plain.mjs");
  writeFileSync(file, src);
  return (await import(file)).Template;
}

// ---- conversations ---------------------------------------------------------------------
let seed = 20260127;
function rnd() { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; }
const pick = (a) => a[Math.floor(rnd() * a.length)];
const chance = (p) => rnd() < p;

const TEXTS = ["Hello!", "What is the weather in Paris?", "Explain quicksort briefly.", "thanks",
  "Ünïcödé: héllo wörld, 你好, こんにちは, 🎉🚀", "Line one\nLine two\n\nLine four", "  padded with spaces  ",
  "\n\nleading and trailing newlines\n\n", "tabs\tand \"quotes\" and 'apostrophes' and \\backslashes\\",
  "Markup <b>bold</b> & <tool_call>not a call</tool_call>", "{\"json\": \"in content\"}", "",
  "Ends with ideographic space\u3000", "\u00a0non-breaking spaces\u00a0", "Use /think please", "/no_think short answer"];
const THOUGHTS = ["Let me think about this.", "The user wants the weather; call the tool.", "\nMulti-line\nreasoning\n",
  "  spaced reasoning  ", "推理：先查天气。", ""];
const TOOLS = [
  { type: "function", function: { name: "get_weather", description: "Get the current weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string", description: "City name" },
      unit: { type: "string", enum: ["celsius", "fahrenheit"], description: "Temperature unit" } }, required: ["city"] } } },
  { type: "function", function: { name: "search", description: "  Search the web.  ",
    parameters: { type: "object", properties: { query: { type: "string" }, max_results: { type: "integer", description: "How many" },
      safe: { type: "boolean" } }, required: ["query"] } } },
  { type: "function", function: { name: "run_code", description: "Run Python code and return stdout.",
    parameters: { type: "object", properties: { code: { type: "string", description: "Source" },
      env: { type: "object", description: "Environment", properties: { timeout: { type: "number" } } },
      args: { type: "array", items: { type: "string" } } }, required: ["code"] } } },
  { type: "function", function: { name: "no_params", description: "Takes nothing.", parameters: { type: "object", properties: {} } } },
];
function toolArgs(name) {
  switch (name) {
    case "get_weather": return chance(0.5) ? { city: pick(["Paris", "東京", "São Paulo"]) } : { city: "Berlin", unit: "celsius" };
    case "search": return { query: pick(["jinja templates", "üñí"]), max_results: pick([3, 10]), safe: pick([true, false]) };
    case "run_code": return { code: "print('hi')\nprint(1 + 2)", env: { timeout: 2.5 }, args: ["-v", "x y"] };
    default: return {};
  }
}
function makeConversation(i) {
  const msgs = [];
  const tools = chance(0.45) ? TOOLS.filter(() => chance(0.6)) : null;
  if (tools && tools.length === 0) tools.push(TOOLS[0]);
  if (chance(0.5)) msgs.push({ role: chance(0.15) ? "developer" : "system", content: pick(["You are a helpful assistant.", "Be brief.", "", "Système: réponds en français.\nNew line."]) });
  const turns = 1 + Math.floor(rnd() * 4);
  for (let t = 0; t < turns; t++) {
    msgs.push({ role: "user", content: pick(TEXTS) });
    const last = t === turns - 1;
    if (last && chance(0.75)) break;
    const a = { role: "assistant", content: pick(TEXTS) };
    if (chance(0.3)) a.reasoning_content = pick(THOUGHTS);
    else if (chance(0.2)) a.content = "<think>\n" + pick(THOUGHTS) + "\n</think>\n\n" + a.content;
    if (tools && chance(0.5)) {
      const n = 1 + Math.floor(rnd() * 2);
      a.tool_calls = [];
      for (let k = 0; k < n; k++) {
        const tool = pick(tools).function.name;
        const args = toolArgs(tool);
        a.tool_calls.push({ id: "call_" + i + "_" + t + "_" + k, type: "function",
          function: { name: tool, arguments: chance(0.25) ? JSON.stringify(args) : args } });
      }
      if (chance(0.4)) a.content = "";
      msgs.push(a);
      for (const call of a.tool_calls)
        msgs.push({ role: "tool", tool_call_id: call.id, name: call.function.name,
                    content: pick(["{\"temperature\": 21, \"sky\": \"clear\"}", "3 results found", "", "错误: timeout"]) });
      if (chance(0.6)) msgs.push({ role: "assistant", content: pick(TEXTS), ...(chance(0.3) ? { reasoning_content: pick(THOUGHTS) } : {}) });
    } else msgs.push(a);
  }
  const conv = { messages: msgs };
  if (tools) conv.tools = tools;
  conv.add_generation_prompt = msgs[msgs.length - 1].role !== "assistant" ? chance(0.85) : chance(0.2);
  conv.enable_thinking = chance(0.6);
  const kwargs = {};
  if (chance(0.25)) kwargs.reasoning_effort = pick(["low", "medium", "high"]);
  if (chance(0.15)) kwargs.truncate_history_thinking = false;
  if (chance(0.1)) kwargs.preserve_thinking = true;
  if (Object.keys(kwargs).length) conv.kwargs = kwargs;
  return conv;
}

// ---- rendering -------------------------------------------------------------------------
// Special tokens per template family (what tokenizer_config.json gives transformers).
const TOKENS = {
  qwen: ["<|endoftext|>", "<|im_end|>"], nemotron: ["<s>", "<|im_end|>"], "gpt-oss": ["<|startoftext|>", "<|return|>"],
  glm: ["[gMASK]<sop>", "<|endoftext|>"], deepseek: ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"],
};
const family = (name) => Object.keys(TOKENS).find((f) => name.startsWith(f)) ?? "qwen";
function vars(conv, name) {
  const [bos, eos] = TOKENS[family(name)];
  const v = { messages: conv.messages, add_generation_prompt: conv.add_generation_prompt,
              enable_thinking: conv.enable_thinking, bos_token: bos, eos_token: eos };
  if (conv.tools) v.tools = conv.tools;
  return Object.assign(v, conv.kwargs ?? {});
}

const PlainT = await loadLib(false), PyT = await loadLib(true);
const convs = Array.from({ length: N_CONV }, (_, i) => makeConversation(i));
writeFileSync(join(HERE, "conversations.jsonl"), convs.map((c) => JSON.stringify(c)).join("\n") + "\n");
mkdirSync(join(HERE, "expected"), { recursive: true });
for (const file of readdirSync(join(HERE, "templates")).filter((f) => f.endsWith(".jinja")).sort()) {
  const name = file.replace(/\.jinja$/, "");
  const src = readFileSync(join(HERE, "templates", file), "utf8");
  const lines = [];
  let n_err = 0, n_diff = 0;
  convs.forEach((conv, i) => {
    const v = vars(conv, name);
    const render = (T) => {
      try {
        return { out: new T(src).render(structuredClone(v)) };
      } catch (e) {
        return { error: String(e.message ?? e) };
      }
    };
    const py = render(PyT), plain = render(PlainT);
    const rec = { id: i };
    if (py.error !== undefined) { rec.error = py.error; n_err++; }
    else {
      rec.sha256 = createHash("sha256").update(py.out, "utf8").digest("hex");
      rec.len = Buffer.byteLength(py.out, "utf8");
      if (i < FULL_TEXT) rec.out = py.out;
    }
    if (py.error !== plain.error || py.out !== plain.out) { rec.hf_differs = true; n_diff++; }
    lines.push(JSON.stringify(rec));
  });
  writeFileSync(join(HERE, "expected", name + ".jsonl"), lines.join("\n") + "\n");
  console.log(`${name}: ${convs.length} conversations, ${n_err} raise, ${n_diff} differ from plain @huggingface/jinja`);
}

// tools.mjs — forced tool calls through the official OpenAI Node client (run by
// tests/test_server_tools.sh): node tools.mjs BASE_URL MODEL [FREE]. For tool_choice "required" and
// a named function, not streamed, streamed by hand (the deltas summed as OpenAI documents them) and
// through the client's stream helper: finish_reason "tool_calls", one call to an offered (or the
// named) function, arguments that parse as a JSON object holding the required parameter (FREE 1:
// "required" lets them be any object). The streamed call comes piece by piece (its arguments in
// several deltas, the helper's arguments.delta events) and adds up to the call the same request
// gets not streamed (same seed, no prompt cache). Prints "ok NAME" or "FAIL NAME: why" per case.
import OpenAI from "openai";
import { assert, check, failures } from "./check.mjs";

const [baseURL, model, free] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const messages = [{ role: "user", content: "Weather in Paris?" }];
const tools = [
  { type: "function", function: { name: "get_weather", parameters: { type: "object",
    properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"] } } },
  { type: "function", function: { name: "add", parameters: { type: "object",
    properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } } },
];
const choices = [["required", "required"], ["named", { type: "function", function: { name: "get_weather" } }]];
function checkCall(label, tool_choice, finish, calls) {
  assert(finish === "tool_calls", `${label}: finish_reason ${finish}`);
  assert(calls && calls.length === 1, `${label}: calls ${JSON.stringify(calls)}`);
  const c = calls[0];
  assert(c.type === "function" && typeof c.id === "string" && c.id.length > 0, `${label}: ${JSON.stringify(c)}`);
  const want = tool_choice === "required" ? null : tool_choice.function.name;
  assert(want ? c.function.name === want : ["get_weather", "add"].includes(c.function.name), `${label}: name ${c.function.name}`);
  const args = JSON.parse(c.function.arguments);
  assert(args && typeof args === "object" && !Array.isArray(args), `${label}: arguments ${c.function.arguments}`);
  if (free === "1" && !want) return;
  const req = c.function.name === "get_weather" ? ["city"] : ["a", "b"];
  for (const k of req) assert(k in args, `${label}: no '${k}' in ${c.function.arguments}`);
}
// The streamed call is the one the same request gets whole.
function sameCall(label, calls, whole) {
  assert(whole, `${label}: no answer not streamed to compare with`);
  const a = calls[0].function, b = whole.function;
  assert(a.name === b.name && a.arguments === b.arguments,
    `${label}: streamed ${a.name} ${a.arguments}, not streamed ${b.name} ${b.arguments}`);
}
for (const [label, tool_choice] of choices) {
  const request = { model, messages, tools, tool_choice, max_tokens: 80, seed: 11, cache_prompt: false };
  let whole = null;
  await check(`${label}: chat.completions.create`, async () => {
    const r = await client.chat.completions.create(request);
    checkCall(label, tool_choice, r.choices[0].finish_reason, r.choices[0].message.tool_calls);
    whole = r.choices[0].message.tool_calls[0];
  });
  await check(`${label}: streamed deltas summed by index (id, type and name in the first), arguments in pieces`, async () => {
    const stream = await client.chat.completions.create({ ...request, stream: true });
    const calls = [];
    let finish = null, pieces = 0;
    for await (const chunk of stream) {
      for (const ch of chunk.choices) {
        if (ch.finish_reason) finish = ch.finish_reason;
        for (const d of ch.delta.tool_calls || []) {
          assert(Number.isInteger(d.index), `delta without index ${JSON.stringify(d)}`);
          if (!calls[d.index]) {
            assert(d.id && d.type === "function" && d.function && d.function.name, `first delta ${JSON.stringify(d)}`);
            calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: "" } };
          } else {
            assert(!d.id && !(d.function && d.function.name), `a later delta repeats id or name ${JSON.stringify(d)}`);
          }
          if (d.function && d.function.arguments) pieces++;
          calls[d.index].function.arguments += (d.function && d.function.arguments) || "";
        }
      }
    }
    checkCall(label, tool_choice, finish, calls);
    assert(pieces >= 2, `${label}: the arguments came in ${pieces} delta(s)`);
    sameCall(label, calls, whole);
  });
  await check(`${label}: the client's stream helper assembles the call from its arguments deltas`, async () => {
    const stream = client.beta.chat.completions.stream(request);
    let deltas = 0, done = null;
    stream.on("tool_calls.function.arguments.delta", (e) => { if (e.arguments_delta) deltas++; });
    stream.on("tool_calls.function.arguments.done", (e) => { done = e; });
    const r = await stream.finalChatCompletion();
    const calls = r.choices[0].message.tool_calls;
    checkCall(label, tool_choice, r.choices[0].finish_reason, calls);
    assert(deltas >= 2, `${label}: ${deltas} arguments.delta event(s)`);
    assert(done && done.index === 0 && done.arguments === calls[0].function.arguments, `${label}: done ${JSON.stringify(done)}`);
    sameCall(label, calls, whole);
  });
}
process.exit(failures() ? 1 : 0);

// client.mjs — the official OpenAI Node client against hmoe serve (run by tests/test_server.sh):
// node client.mjs BASE_URL API_KEY MODEL GREEDY_TEXT. Prints "ok NAME" or "FAIL NAME: why" per
// case; GREEDY_TEXT is the server's answer to "Hi there" with 12 tokens at temperature 0.
import OpenAI from "openai";
import { assert, check, failures } from "./check.mjs";

const [baseURL, apiKey, model, greedy] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });
const messages = [{ role: "user", content: "Hi there" }];

await check("models.list", async () => {
  const list = await client.models.list();
  assert(list.data.length === 1 && list.data[0].id === model, JSON.stringify(list.data));
});
await check("chat.completions.create", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
  assert(r.choices[0].message.content === greedy, `content ${JSON.stringify(r.choices[0].message.content)}`);
  assert(r.usage.completion_tokens === 12, `usage ${JSON.stringify(r.usage)}`);
});
await check("chat.completions.create stream", async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = "", usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content || "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert(text === greedy, `streamed ${JSON.stringify(text)}`);
  assert(finish === "length" && usage && usage.completion_tokens === 12, `finish ${finish} usage ${JSON.stringify(usage)}`);
});
await check("tools round trip (tools, an assistant tool call, the tool's result)", async () => {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
  const first = await client.chat.completions.create({ model, messages, tools, max_tokens: 6 });
  assert(["length", "stop", "tool_calls"].includes(first.choices[0].finish_reason), JSON.stringify(first));
  const r = await client.chat.completions.create({
    model, tools, max_tokens: 4,
    messages: [...messages,
      { role: "assistant", content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "18 C, sunny" }],
  });
  assert(r.choices[0].message.role === "assistant" && r.usage.prompt_tokens > 40, JSON.stringify(r));
});
await check("completions.create", async () => {
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, temperature: 0 });
  assert(typeof r.choices[0].text === "string" && r.usage.completion_tokens === 8, JSON.stringify(r));
});
await check("a bad request raises BadRequestError (400)", async () => {
  try {
    await client.chat.completions.create({ model, messages, n: 2 });
  } catch (e) {
    assert(e instanceof OpenAI.BadRequestError && e.status === 400, `got ${e.status} ${e.message}`);
    return;
  }
  throw new Error("no error raised");
});
await check("a wrong key raises AuthenticationError (401)", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  try {
    await bad.models.list();
  } catch (e) {
    assert(e instanceof OpenAI.AuthenticationError, `got ${e.status}`);
    return;
  }
  throw new Error("no error raised");
});
await check("response_format json_schema: the answer parses and matches the schema", async () => {
  const schema = { type: "object", properties: { city: { type: "string" }, temp: { type: "integer" },
    sunny: { type: "boolean" }, tags: { type: "array", items: { enum: ["a", "b"] } } },
    required: ["city", "temp", "sunny", "tags"], additionalProperties: false };
  for (const max_tokens of [60, 150]) {
    const r = await client.chat.completions.create({ model, messages, max_tokens, temperature: 1,
      response_format: { type: "json_schema", json_schema: { name: "weather", schema, strict: true } } });
    const v = JSON.parse(r.choices[0].message.content);
    assert(typeof v.city === "string" && Number.isInteger(v.temp) && typeof v.sunny === "boolean" &&
      Array.isArray(v.tags) && v.tags.every((t) => t === "a" || t === "b") && Object.keys(v).length === 4,
      JSON.stringify(v));
    assert(r.usage.completion_tokens <= max_tokens, JSON.stringify(r.usage));
  }
});
await check("response_format json_object streamed: the deltas make one JSON object", async () => {
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 60, stream: true,
    response_format: { type: "json_object" } });
  let text = "";
  for await (const chunk of stream) for (const c of chunk.choices) text += c.delta.content || "";
  const v = JSON.parse(text);
  assert(v && typeof v === "object" && !Array.isArray(v), text);
});
await check("tool_choice required and a named function give a tool call", async () => {
  const tools = [{ type: "function", function: { name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } },
    { type: "function", function: { name: "add", parameters: { type: "object" } } }];
  for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice, max_tokens: 60,
      parallel_tool_calls: false });
    const c = r.choices[0];
    assert(c.finish_reason === "tool_calls" && c.message.tool_calls.length === 1, JSON.stringify(r));
    const call = c.message.tool_calls[0];
    const args = JSON.parse(call.function.arguments);
    if (tool_choice !== "required")
      assert(call.function.name === "get_weather" && typeof args.city === "string", JSON.stringify(call));
    else assert(["get_weather", "add"].includes(call.function.name), JSON.stringify(call));
  }
});
process.exit(failures() ? 1 : 0);

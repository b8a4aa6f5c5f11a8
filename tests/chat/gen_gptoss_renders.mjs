// gen_gptoss_renders.mjs — expected renders of the gpt-oss (harmony) chat template: the model's
// own Jinja template (tests/fixtures/chat/gpt-oss-template.jinja, identical to llama.cpp's
// models/templates/openai-gpt-oss-120b.jinja) rendered by the npm package @huggingface/jinja
// over the conversations below. Writes tests/fixtures/chat/gpt-oss-renders.jsonl, one line per
// case: {"name", "messages", "tools"?, "add_generation_prompt", "reasoning_effort"?,
// "current_date", "rendered"} or, where the template raises, "error" instead of "rendered".
// Messages use the OpenAI field reasoning_content; the template reads it as `thinking` (as
// llama.cpp passes it). The date is fixed by a stand-in Date for strftime_now. Run:
//   cd /tmp/t && npm install @huggingface/jinja@0.5.13
//   NODE_PATH=/tmp/t/node_modules node tests/chat/gen_gptoss_renders.mjs
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
const { Template } = require(require.resolve('@huggingface/jinja', { paths: (process.env.NODE_PATH || '').split(':') }));
const DATE = [2026, 2, 14, 12]; // 2026-03-14, local noon
const RealDate = Date;
globalThis.Date = class extends RealDate {
    constructor(...a) { super(...(a.length ? a : DATE)); }
};
const tmpl = new Template(readFileSync(new URL('../fixtures/chat/gpt-oss-template.jinja', import.meta.url), 'utf8'));

const weather = { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city.',
    parameters: { type: 'object', properties: {
        city: { type: 'string', description: 'City name' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'], default: 'celsius' },
        days: { type: 'integer', description: 'Forecast days', default: 1 } }, required: ['city'] } } };
const search = { type: 'function', function: { name: 'search', description: 'Search the web.',
    parameters: { type: 'object', properties: {
        query: { type: 'string' }, limit: { type: 'number' }, safe: { type: 'boolean', default: true },
        tags: { type: 'array', items: { type: 'string' } }, ids: { type: 'array', items: { type: 'integer' } },
        flags: { type: 'array', items: { type: 'boolean' } }, scores: { type: 'array', items: { type: 'number' } },
        anything: { type: 'array' }, maybe: { type: 'string', nullable: true },
        maybe_list: { type: 'array', items: { type: 'string' }, nullable: true } }, required: ['query'] } } };
const nested = { type: 'function', function: { name: 'create_event', description: 'Create a calendar event.',
    parameters: { type: 'object', properties: {
        title: { type: 'string', description: 'Title' },
        when: { type: 'object', properties: { start: { type: 'string' }, end: { type: 'string' },
                                              all_day: { type: 'boolean' } }, required: ['start'] },
        attendees: { type: 'array', items: { type: 'object', properties: { email: { type: 'string' } } } },
        meta: { type: 'object' },
        points: { type: 'array', items: { type: 'array', items: { type: 'number' } } },
        mixed: { type: ['string', 'number'] }, single: { type: ['string'] },
        choice: { oneOf: [{ type: 'string', description: 'a name' }, { type: 'integer', default: 0 }],
                  default: 'x' },
        either: { oneOf: [{ type: 'object' }, { type: 'object' }] },
        free: { description: 'no type at all' } }, required: ['title', 'when'] } } };
const noparams = { type: 'function', function: { name: 'get_time', description: 'Current time.' } };
const emptyprops = { type: 'function', function: { name: 'ping', description: 'Ping.',
    parameters: { type: 'object', properties: {} } } };
const longitems = { type: 'function', function: { name: 'bulk', description: 'Bulk op.',
    parameters: { type: 'object', properties: {
        rows: { type: 'array', items: { type: 'object', properties: { aaaaaaaaaa: { type: 'string' },
            bbbbbbbbbb: { type: 'string' }, cccccccccc: { type: 'string' } } } },
        pick: { type: 'string', enum: ['a', 'b', 'c'] } } } } };

const U = (content) => ({ role: 'user', content });
const A = (content, reasoning_content) => (reasoning_content === undefined ? { role: 'assistant', content }
    : { role: 'assistant', content, reasoning_content });
const S = (content) => ({ role: 'system', content });
const D = (content) => ({ role: 'developer', content });
const T = (content) => ({ role: 'tool', content });
const C = (name, args, content = '', reasoning_content) => {
    const m = { role: 'assistant', content, tool_calls: [{ type: 'function', function: { name, arguments: args } }] };
    if (reasoning_content !== undefined) m.reasoning_content = reasoning_content;
    return m;
};

const cases = [
    ['single_user', [U('Hello!')]],
    ['system_user', [S('You are terse.'), U('Hi')]],
    ['developer_user', [D('Answer in French.'), U('Hello')]],
    ['empty_system', [S(''), U('Hi')]],
    ['late_system_ignored', [U('Hi'), S('ignored'), U('Again')]],
    ['multi_turn', [U('What is 2+2?'), A('4', 'simple'), U('And 3+3?')]],
    ['multi_turn_no_reasoning', [U('a'), A('b'), U('c'), A('d'), U('e')]],
    ['no_gen_prompt_last_assistant', [U('hi'), A('Hello!')], { add_generation_prompt: false }],
    ['no_gen_prompt_last_assistant_reasoning', [U('hi'), A('Hello!', 'greet back')], { add_generation_prompt: false }],
    ['no_gen_prompt_empty_reasoning', [U('hi'), A('Hello!', '')], { add_generation_prompt: false }],
    ['no_gen_prompt_last_user', [U('hi')], { add_generation_prompt: false }],
    ['no_gen_prompt_history_reasoning', [U('q1'), A('a1', 'r1'), U('q2'), A('a2', 'r2')], { add_generation_prompt: false }],
    ['effort_low', [U('Quick one')], { reasoning_effort: 'low' }],
    ['effort_high', [S('Be thorough.'), U('Prove it')], { reasoning_effort: 'high' }],
    ['effort_medium_explicit', [U('x')], { reasoning_effort: 'medium' }],
    ['unicode', [S('日本語で答えて'), U('東京の名物を3つ短く 🍣'), A('寿司、天ぷら、もんじゃ', '考える')]],
    ['multiline', [U('line1\nline2\n\n  indented\ttab'), A('ok\n\n- a\n- b')]],
    ['quotes_backslashes', [U('say "hi" \\ back'), A("it's \"fine\"")]],
    ['tools_only', [U('Weather in Paris?')], { tools: [weather] }],
    ['tools_and_system', [S('Use tools wisely.'), U('Weather in Rome?')], { tools: [weather] }],
    ['tools_many', [U('Find things')], { tools: [weather, search, noparams, emptyprops] }],
    ['tools_nested', [U('Plan a meeting')], { tools: [nested] }],
    ['tools_long_items', [U('Bulk')], { tools: [longitems] }],
    ['tool_call_then_result', [U('Weather in Paris?'), C('get_weather', { city: 'Paris' }), T('{"temp": 21}')],
        { tools: [weather] }],
    ['tool_call_reasoning_kept', [U('Weather?'), C('get_weather', { city: 'Oslo', days: 2 }, '', 'need the tool'),
        T('sunny')], { tools: [weather] }],
    ['tool_call_content_as_analysis', [U('Weather?'), C('get_weather', { city: 'Oslo' }, 'Let me check.'), T('rain')],
        { tools: [weather] }],
    ['tool_call_reasoning_dropped_after_final', [U('Weather?'), C('get_weather', { city: 'Oslo' }, '', 'check'),
        T('rain'), A('It rains in Oslo.', 'summarize'), U('Thanks')], { tools: [weather] }],
    ['tool_call_two_rounds', [U('Compare'), C('get_weather', { city: 'A' }, '', 'first'), T('1'),
        C('get_weather', { city: 'B' }, '', 'second'), T('2')], { tools: [weather] }],
    ['tool_call_unicode_args', [U('Météo?'), C('get_weather', { city: 'Zürich', note: 'naïve "q"\n' }), T('☀️ 25°C')],
        { tools: [weather] }],
    ['tool_call_nested_args', [U('Event'), C('create_event', { title: 'Sync', when: { start: '10:00', end: null },
        attendees: [{ email: 'a@b.c' }], n: 3, f: 1.5, ok: true, list: [] })], { tools: [nested] }],
    ['tool_result_json_string', [U('x'), C('search', { query: 'q' }), T('{"results": ["a", "b"], "n": 2}')],
        { tools: [search] }],
    ['tool_result_multiline', [U('x'), C('search', { query: 'q' }), T('line1\nline2\ttab "q" \\')], { tools: [search] }],
    ['tool_result_then_final', [U('x'), C('search', { query: 'q' }), T('r'), A('Done.')], { tools: [search] }],
    ['tool_result_then_final_no_gen', [U('x'), C('search', { query: 'q' }), T('r'), A('Done.', 'wrap up')],
        { tools: [search], add_generation_prompt: false }],
    ['tool_call_last_no_gen', [U('x'), C('search', { query: 'q' }, '', 'go')], { tools: [search], add_generation_prompt: false }],
    ['tool_call_without_tools_list', [U('x'), C('get_time', {}), T('12:00')]],
    ['tool_empty_args', [U('time?'), C('get_time', {}), T('noon')], { tools: [noparams] }],
    ['developer_and_tools', [D('Dev rules.'), U('go')], { tools: [search] }],
    ['long_conversation', [S('sys'), U('1'), A('one'), U('2'), A('two', 'r'), U('3'), A('three'), U('4')]],
    ['assistant_first', [A('I start.'), U('ok')]],
    ['empty_user', [U('')]],
    ['empty_assistant', [U('x'), A(''), U('y')]],
    ['special_looking_text', [U('<|start|>user text <|end|>'), A('<|message|> not a channel')]],
    ['effort_low_tools', [U('w')], { tools: [weather], reasoning_effort: 'low' }],
    ['effort_high_no_gen', [U('w'), A('x', 'y')], { reasoning_effort: 'high', add_generation_prompt: false }],
    ['system_multiline', [S('Rule 1.\nRule 2.\n\nRule 3.'), U('ok')]],
    ['tools_search_call', [U('find cats'), C('search', { query: 'cats', limit: 5, tags: ['pets'] }), T('[]'),
        A('None found.')], { tools: [search, weather] }],
    ['reasoning_only_history', [U('q'), A('', 'just thinking'), U('q2')]],
    ['emoji_everywhere', [S('🤖'), U('👋🏽 hi'), A('👍', '🤔')]],
    ['user_user', [U('first'), U('second')]],
    ['system_only', [S('only system')]],
    ['developer_only_no_gen', [D('dev')], { add_generation_prompt: false }],
    // what the template refuses
    ['error_channel_in_content', [U('x'), A('<|channel|>final<|message|>hi')]],
    ['error_channel_in_reasoning', [U('x'), A('hi', '<|channel|>analysis<|message|>r')]],
    ['error_content_and_reasoning_on_call', [U('x'), C('search', { query: 'q' }, 'text', 'thought')], { tools: [search] }],
    ['error_tool_without_call', [U('x'), T('orphan')]],
    ['error_tool_after_final', [U('x'), C('search', { query: 'q' }), T('r'), A('done'), T('late')], { tools: [search] }],
];

const lines = [];
for (const [name, messages, opt = {}] of cases) {
    const ctx = {
        messages: messages.map((m) => {
            const j = { ...m };
            if ('reasoning_content' in j) { j.thinking = j.reasoning_content; delete j.reasoning_content; }
            return j;
        }),
        add_generation_prompt: opt.add_generation_prompt ?? true,
        bos_token: '<|startoftext|>', eos_token: '<|return|>',
    };
    if (opt.tools) ctx.tools = opt.tools;
    if (opt.reasoning_effort) ctx.reasoning_effort = opt.reasoning_effort;
    const rec = { name, messages };
    if (opt.tools) rec.tools = opt.tools;
    rec.add_generation_prompt = ctx.add_generation_prompt;
    if (opt.reasoning_effort) rec.reasoning_effort = opt.reasoning_effort;
    rec.current_date = '2026-03-14';
    try {
        rec.rendered = tmpl.render(ctx);
    } catch (e) {
        rec.error = String(e.message || e);
    }
    lines.push(JSON.stringify(rec));
}
writeFileSync(new URL('../fixtures/chat/gpt-oss-renders.jsonl', import.meta.url), lines.join('\n') + '\n');
console.error(`${lines.length} cases`);

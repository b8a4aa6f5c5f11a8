/* fuzz_jinja.c — libFuzzer target for the chat template interpreter (jinja.h): the input is
 * split at the first NUL byte into a template and a JSON object of variables; the template
 * is compiled and, when it compiles, rendered with tight limits. Any crash, sanitizer report,
 * leak or a render that breaks the limits it was given is a bug. Build and run (Makefile
 * `fuzz` target, clang + ASan/UBSan; seeds are the real templates of tests/jinja/templates):
 *   make fuzz && ./build/fuzz/fuzz_jinja -max_total_time=600 -dict=tests/data/fuzz_jinja.dict \
 *       build/fuzz/corpus-jinja tests/jinja/templates
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/jinja.h"
#include "hmoe/json.h"

/* Variables used when the input carries none: a conversation with every field templates read. */
static const char default_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi <think>\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\nok\", \"reasoning_content\": \"r\","
    " \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, true, null]}}}]},"
    " {\"role\": \"tool\", \"content\": \"{}\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"array\"}}}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    const char *nul = memchr(src, 0, size);
    size_t src_len = nul ? (size_t)(nul - src) : size;
    struct hmoe_err err = {0};
    struct hmoe_jinja *t = NULL;
    if (hmoe_jinja_compile(src, src_len, &t, &err) != HMOE_OK) return 0;
    struct hmoe_json *vars = nul ? hmoe_json_parse(nul + 1, size - src_len - 1, &err)
                                 : hmoe_json_parse(default_vars, sizeof default_vars - 1, &err);
    struct hmoe_jinja_render_opts o = {.limits = {.max_depth = 200, .max_iterations = 20000, .max_output = 1 << 20,
                                                  .max_seconds = 2}, .now = 1769506200};
    char *out = NULL;
    size_t n = 0;
    if (hmoe_jinja_render(t, vars, &o, &out, &n, &err) == HMOE_OK && (n > o.limits.max_output || !out)) abort();
    free(out);
    hmoe_json_free(vars);
    hmoe_jinja_free(t);
    return 0;
}

// check.mjs — the case runner of the openai-client scripts: check(NAME, fn) prints "ok NAME" or
// "FAIL NAME: why" and counts the failures (failures() at the end), assert(cond, why) throws.
let failed = 0;
export async function check(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.message ? e.message : e}`);
  }
}
export function assert(cond, why) {
  if (!cond) throw new Error(why);
}
export const failures = () => failed;

// A node:test reporter for scripts/run-tests.mjs: one JSON line with the run's counts (the summary
// of the whole run, not of each file) and the names of the tests that failed, so the runner counts
// and names without parsing the spec reporter's output.
export default async function* summary(source) {
  const failed = [];
  for await (const event of source) {
    if (event.type === 'test:fail' && event.data.details?.type !== 'suite') {
      failed.push(event.data.name);
    }
    if (event.type === 'test:summary' && event.data.file === undefined) {
      yield `${JSON.stringify({ counts: event.data.counts, failed })}\n`;
    }
  }
}

// A node:test reporter for scripts/run-tests.mjs: one JSON line with the run's counts (the summary
// of the whole run, not of each file) and the names of the tests that failed, so the runner counts
// and names without parsing the spec reporter's output. `lingeredMs`: how long the file's process
// ran on after its last test ended (a server, socket or timer left open holds it).
export default async function* summary(source) {
  const failed = [];
  let lastTestAt = null;
  for await (const event of source) {
    if (event.type === 'test:fail' && event.data.details?.type !== 'suite') {
      failed.push(event.data.name);
    }
    if (event.type === 'test:pass' || event.type === 'test:fail') lastTestAt = Date.now();
    if (event.type === 'test:summary' && event.data.file === undefined) {
      const lingeredMs = lastTestAt === null ? null : Date.now() - lastTestAt;
      yield `${JSON.stringify({ counts: event.data.counts, failed, lingeredMs })}\n`;
    }
  }
}

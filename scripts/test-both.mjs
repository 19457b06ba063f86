// npm test: the suite on SQLite, then on PostgreSQL. The second half runs whatever the first
// gave (a failure on one store says nothing of the other), each is reported, and the exit status
// is non-zero if either failed. Other npm scripts may be named instead (the test of this script).
import { spawnSync } from 'node:child_process';

const scripts = process.argv.length > 2 ? process.argv.slice(2) : ['test:sqlite', 'test:postgres'];
const outcomes = scripts.map((script) => {
  const started = performance.now();
  const run = spawnSync('npm', ['run', '--silent', script], { stdio: 'inherit' });
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  let outcome = 'passed';
  if (run.error) outcome = `did not start (${run.error.message})`;
  else if (run.signal) outcome = `stopped by ${run.signal}`;
  else if (run.status !== 0) outcome = `FAILED (exit status ${run.status})`;
  return { passed: outcome === 'passed', line: `${script}: ${outcome} in ${seconds} s` };
});

console.log(`\n${outcomes.map(({ line }) => line).join('\n')}`);
process.exitCode = outcomes.every(({ passed }) => passed) ? 0 : 1;

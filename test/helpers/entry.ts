import { join } from 'node:path';

/**
 * Whether the suite runs built: scripts/run-tests.mjs compiles src/, test/, soak/ and bench/ into
 * .build/ once and runs the JavaScript, so that no process it spawns transpiles the sources again
 * (about 1.5 s of CPU each under tsx). A test file run by hand with `node --import tsx --test`
 * runs from the sources, and so does everything it spawns.
 */
export const suiteIsBuilt = !import.meta.url.endsWith('.ts');

/**
 * The arguments of `node` that run one of the project's programs, given by its source path from the
 * package root (`src/main.ts`): the built file when the suite runs built, else the source through
 * tsx. Relative paths: tests run from the package root.
 */
export function nodeArgsOf(sourcePath: string): string[] {
  return suiteIsBuilt
    ? [join('.build', sourcePath.replace(/\.ts$/, '.js'))]
    : ['--import', 'tsx', sourcePath];
}

/**
 * The code of a worker (`new Worker(code, { eval: true })`) that runs the module at `moduleUrl`:
 * as it is when built, through tsx when it is a source file.
 */
export function workerCodeOf(moduleUrl: string): string {
  const entry = JSON.stringify(moduleUrl);
  return moduleUrl.endsWith('.ts')
    ? `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${entry}); });`
    : `import(${entry});`;
}

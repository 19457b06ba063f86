#!/usr/bin/env node
// Entry point of the `assay` command: runs the compiled CLI (npm run build creates dist/).
import { existsSync } from 'node:fs';

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  console.error('assay is not built: run `npm run build` in the assay folder first');
  process.exit(1);
}
await import(main.href);

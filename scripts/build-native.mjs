// npm ci's install step: builds the small C addon that hands clamd files (binding.gyp,
// src/native/fd-passing.c). It needs python3, make and g++ (setup.sh installs them). Without
// them Assay still works: items go to clamd as streams, and `serve` says so in its log.
import { spawnSync } from 'node:child_process';

const result = spawnSync('node-gyp rebuild', { stdio: 'inherit', shell: true });
if (result.status !== 0) {
  console.warn(
    '\n[assay] Could not build the native part that hands clamd files (node-gyp needs python3, ' +
      'make and g++). Assay works without it: items go to clamd as streams (INSTREAM), which ' +
      'costs clamd about 10-15% more CPU. Install those and run `npm run install` to build it.\n',
  );
}

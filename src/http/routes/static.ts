import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { eicar, LANGUAGE_TEST_MARKER, LOCAL_TEST_FILE_MARKER } from '../../engines/test-content.js';
import { packageRoot } from '../../paths.js';

/** Test content, served without credentials so that clients can submit it by URL; the icon. */
export default async function staticSamples(app: FastifyInstance) {
  const samples: Record<string, { type: string; body: Buffer }> = {
    '/static/eicar.txt': { type: 'text/plain', body: Buffer.from(eicar()) },
    '/static/samples/malware': {
      type: 'application/octet-stream',
      body: Buffer.from(LOCAL_TEST_FILE_MARKER),
    },
    '/static/samples/language.txt': { type: 'text/plain', body: Buffer.from(LANGUAGE_TEST_MARKER) },
    '/static/samples/image.jpg': {
      type: 'image/jpeg',
      body: readFileSync(join(packageRoot(), 'static', 'samples', 'image.jpg')),
    },
  };
  for (const [path, sample] of Object.entries(samples)) {
    app.get(path, async (_request, reply) => reply.type(sample.type).send(sample.body));
  }
  // The icon the console and /docs link to (a browser asks for one on every page otherwise).
  const icon = readFileSync(join(packageRoot(), 'static', 'favicon.svg'));
  app.get('/favicon.svg', async (_request, reply) =>
    reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(icon),
  );
}

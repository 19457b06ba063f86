import type { FastifyInstance } from 'fastify';

/** Liveness (the process answers) and readiness (the store and the malware engine answer). */
export default async function health(app: FastifyInstance) {
  const { store, clamd } = app.services;

  app.get('/health/live', async () => ({ status: 'live' }));

  app.get('/health/ready', async (request, reply) => {
    const checks = await Promise.allSettled([store.ping(), clamd.version()]);
    const [storeCheck, clamdCheck] = checks;
    const engines =
      clamdCheck?.status === 'fulfilled'
        ? [
            {
              name: 'clamav',
              category: 'MALWARE',
              version: clamdCheck.value.engine,
              signatures_version: clamdCheck.value.databaseVersion,
              signatures_date: clamdCheck.value.databaseDate?.toISOString() ?? null,
              signatures_age_seconds:
                clamdCheck.value.databaseDate === null
                  ? null
                  : Math.round((Date.now() - clamdCheck.value.databaseDate.getTime()) / 1000),
            },
          ]
        : [];
    const problems: string[] = [];
    if (storeCheck?.status === 'rejected') problems.push(`store: ${String(storeCheck.reason)}`);
    if (clamdCheck?.status === 'rejected') problems.push(`clamav: ${String(clamdCheck.reason)}`);
    if (problems.length > 0) request.log.warn({ problems }, 'not ready');
    return reply
      .code(problems.length === 0 ? 200 : 503)
      .send({ status: problems.length === 0 ? 'ready' : 'not ready', engines, problems });
  });
}

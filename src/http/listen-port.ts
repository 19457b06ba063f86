import { createServer } from 'node:net';

/** What a `serve` on a port another program listens on says, in one line, before it exits. */
export class PortTakenError extends Error {
  override readonly name = 'PortTakenError';

  constructor(host: string, port: number, setting = 'ASSAY_PORT') {
    super(
      `port ${port} on ${host} is already in use (by another program, or another assay serve): stop that one, or set ${setting} to a free port (${setting}=0 picks one)`,
    );
  }
}

/** A listen's EADDRINUSE as PortTakenError; anything else as it is. */
export function listenError(
  error: unknown,
  host: string,
  port: number,
  setting = 'ASSAY_PORT',
): unknown {
  return (error as NodeJS.ErrnoException).code === 'EADDRINUSE'
    ? new PortTakenError(host, port, setting)
    : error;
}

/**
 * Throws PortTakenError if `host:port` is taken now: checked before a `serve` opens its store or
 * touches its data dir, so a second one started by mistake leaves the first's files alone. (Its
 * real listen comes later; a port taken in between fails that with the same error.)
 */
export async function checkPortFree(
  host: string,
  port: number,
  setting = 'ASSAY_PORT',
): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port, exclusive: true }, resolve);
    });
  } catch (error) {
    throw listenError(error, host, port, setting);
  }
  await new Promise((resolve) => server.close(resolve));
}

/**
 * moto's server mode (`python3 -m moto.server`, on these machines: docs/DEVELOPMENT.md) as the
 * S3 and SQS of watched buckets: tags, copy, delete, listing, and S3-to-SQS notifications. One
 * server per test file, on a free loopback port, killed when the file ends; every test makes its
 * own buckets and queues (names with a random part), so tests never see each other's objects.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { after, before } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateBucketCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutBucketNotificationConfigurationCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';

/** The credentials moto takes (any), as a watched source names them: `env:MOTO`. */
export const MOTO_ENV = {
  MOTO_ACCESS_KEY_ID: 'assay-test',
  MOTO_SECRET_ACCESS_KEY: 'assay-test',
  AWS_EC2_METADATA_DISABLED: 'true',
};
const CREDENTIALS = { accessKeyId: 'assay-test', secretAccessKey: 'assay-test' };
const REGION = 'us-east-1';

export interface Moto {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  /** The server's process (its CPU is S3's, in the benchmark). */
  pid: number;
  s3: S3Client;
  sqs: SQSClient;
  /** A new bucket, and with `notify`, a queue its object creations are announced on. */
  bucket(
    prefix: string,
    options?: { notify?: boolean },
  ): Promise<{ name: string; queueUrl: string | null }>;
  put(bucket: string, key: string, body: Buffer | string): Promise<string>;
  /** The object's tags as a map; null when there is no such object. */
  tags(bucket: string, key: string): Promise<Record<string, string> | null>;
  keys(bucket: string): Promise<string[]>;
  exists(bucket: string, key: string): Promise<boolean>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startMoto(): Promise<Moto> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    'python3',
    ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let errors = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    errors = (errors + chunk.toString()).slice(-4000);
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto.server exited: ${errors}`);
    try {
      if ((await fetch(`${endpoint}/moto-api/`)).status < 500) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`moto.server did not start: ${errors}`);
    await sleep(100);
  }
  const common = { region: REGION, endpoint, credentials: CREDENTIALS };
  const s3 = new S3Client({ ...common, forcePathStyle: true });
  const sqs = new SQSClient(common);
  return {
    endpoint,
    pid: child.pid ?? 0,
    s3,
    sqs,
    async bucket(prefix, options = {}) {
      const name = `${prefix}-${randomBytes(4).toString('hex')}`;
      await s3.send(new CreateBucketCommand({ Bucket: name }));
      if (options.notify !== true) return { name, queueUrl: null };
      const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `${name}-events` }));
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }),
      );
      await s3.send(
        new PutBucketNotificationConfigurationCommand({
          Bucket: name,
          NotificationConfiguration: {
            QueueConfigurations: [
              { QueueArn: Attributes?.QueueArn, Events: ['s3:ObjectCreated:*'] },
            ],
          },
        }),
      );
      return { name, queueUrl: QueueUrl ?? null };
    },
    async put(bucket, key, body) {
      const answer = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
      return answer.ETag?.replace(/"/g, '') ?? '';
    },
    async tags(bucket, key) {
      try {
        const { TagSet } = await s3.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: key }));
        return Object.fromEntries((TagSet ?? []).map((tag) => [tag.Key, tag.Value]));
      } catch (error) {
        if ((error as Error).name === 'NoSuchKey') return null;
        throw error;
      }
    },
    async keys(bucket) {
      const { Contents } = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
      return (Contents ?? []).map((entry) => entry.Key ?? '').sort();
    },
    async exists(bucket, key) {
      try {
        await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return true;
      } catch {
        return false;
      }
    },
    async stop() {
      s3.destroy();
      sqs.destroy();
      child.kill('SIGKILL');
      await new Promise((resolve) =>
        child.exitCode !== null ? resolve(null) : child.once('exit', resolve),
      );
    },
  };
}

/** A moto server for the test file: started before its tests, stopped after them. */
export function useMoto(): Moto {
  let moto: Moto | null = null;
  before(async () => {
    moto = await startMoto();
  });
  after(async () => {
    await moto?.stop();
  });
  const started = (): Moto => {
    if (moto === null) throw new Error('moto is not started yet');
    return moto;
  };
  return new Proxy({} as Moto, { get: (_target, name) => Reflect.get(started(), name) });
}

/** moto behind an HTTP relay a test can make refuse requests or go away, as a real S3 may. */
export interface MotoFront {
  /** `http://127.0.0.1:<port>`: the relay (S3 and SQS alike). */
  endpoint: string;
  /** From now on, requests `matching` (method, and URL path decoded) get S3's 403 AccessDenied. */
  deny(matching: (method: string, path: string, query: string) => boolean): void;
  /** Requests answered so far with AccessDenied. */
  denied(): number;
  /** Drops every connection and refuses new ones, as a server gone away. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function motoFront(moto: Moto): Promise<MotoFront> {
  const target = new URL(moto.endpoint);
  const denials: Array<(method: string, path: string, query: string) => boolean> = [];
  let deniedCount = 0;
  let down = false;
  const sockets = new Set<Socket>();
  const server = createHttpServer((request, response) => {
    const [rawPath = '', query = ''] = (request.url ?? '').split('?');
    const path = decodeURIComponent(rawPath);
    if (denials.some((denied) => denied(request.method ?? '', path, query))) {
      deniedCount++;
      request.resume();
      response.writeHead(403, { 'content-type': 'application/xml' });
      response.end(
        '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>',
      );
      return;
    }
    const forwarded = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: request.method,
        path: request.url,
        headers: request.headers,
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forwarded.on('error', () => response.destroy());
    request.pipe(forwarded);
  });
  server.on('connection', (socket) => {
    if (down) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    deny(matching) {
      denials.push(matching);
    },
    denied: () => deniedCount,
    cut() {
      down = true;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      down = false;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** `find`'s first non-null answer, asked every 100 ms; an error naming `what` past `timeoutMs`. */
export async function until<T>(
  what: string,
  find: () => Promise<T | null>,
  timeoutMs = 60_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const found = await find();
    if (found !== null) return found;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// The service under test reads a source's `env:MOTO` credentials from this process's environment.
Object.assign(process.env, MOTO_ENV);

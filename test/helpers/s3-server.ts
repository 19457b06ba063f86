/**
 * A local S3-compatible server (fauxqs, in this process, in memory) on a loopback port, with one
 * bucket, for tests of the S3 spool. The SDK gets static credentials and a region from the
 * environment, so it never asks an instance metadata service or a DNS server for them.
 */
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { buildApp } from 'fauxqs';

export const S3_TEST_CREDENTIALS = { accessKeyId: 'assay-test', secretAccessKey: 'assay-test' };

process.env.AWS_ACCESS_KEY_ID = S3_TEST_CREDENTIALS.accessKeyId;
process.env.AWS_SECRET_ACCESS_KEY = S3_TEST_CREDENTIALS.secretAccessKey;
process.env.AWS_REGION = 'us-east-1';
process.env.AWS_EC2_METADATA_DISABLED = 'true';

export interface S3TestServer {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** A client of the server, for checking what the code under test left there. */
  client: S3Client;
  /** Keys in the bucket. */
  keys(): Promise<string[]>;
  /**
   * Whether a multipart upload is in progress in the (object-less) bucket. fauxqs lacks
   * ListMultipartUploads but refuses DeleteBucket while an upload is open, so: delete, recreate.
   */
  hasOpenUploads(): Promise<boolean>;
  /** Bytes of the object and part bodies (PUTs) the server has stored so far. */
  storedBytes(): number;
  /**
   * From now on, requests `matching` get S3's 500 InternalError (null: none). Each one counts in
   * `injected`.
   */
  failRequests(matching: ((method: string, url: string) => boolean) | null): void;
  injected(): number;
  /** Opens a multipart upload and leaves it open (to prove that hasOpenUploads sees one). */
  openUpload(key: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startS3Server(bucket = 'assay-spool'): Promise<S3TestServer> {
  const app = buildApp({ logger: false });
  let stored = 0;
  let failing: ((method: string, url: string) => boolean) | null = null;
  let injected = 0;
  app.addHook('onRequest', async (request, reply) => {
    if (failing === null || !failing(request.method, request.url)) return;
    injected += 1;
    await reply
      .code(500)
      .type('application/xml')
      .send('<Error><Code>InternalError</Code><Message>injected by the test</Message></Error>');
  });
  app.addHook('onResponse', async (request, reply) => {
    if (request.method === 'PUT' && reply.statusCode === 200) {
      stored += Number(request.headers['content-length'] ?? 0);
    }
  });
  const endpoint = await app.listen({ port: 0, host: '127.0.0.1' });
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: S3_TEST_CREDENTIALS,
  });
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  const keys = async (): Promise<string[]> => {
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
    return (listed.Contents ?? []).map((object) => object.Key ?? '');
  };
  return {
    endpoint,
    bucket,
    client,
    keys,
    storedBytes: () => stored,
    failRequests(matching) {
      failing = matching;
    },
    injected: () => injected,
    async hasOpenUploads() {
      if ((await keys()).length > 0)
        throw new Error('hasOpenUploads needs a bucket without objects');
      try {
        await client.send(new DeleteBucketCommand({ Bucket: bucket }));
      } catch (error) {
        if (error instanceof Error && error.name === 'BucketNotEmpty') return true;
        throw error;
      }
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
      return false;
    },
    async openUpload(key) {
      await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    },
    async stop() {
      client.destroy();
      await app.close();
    },
  };
}

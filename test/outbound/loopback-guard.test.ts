import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import dns, { type LookupAddress } from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { guardRefused, guardSeen, isLoopbackIp } from '../helpers/loopback-only.js';

// The wiring is proved with loopback destinations (seen by the guard) and with 0.0.0.0, which the
// guard refuses but which Linux would connect to the local host anyway: a broken guard cannot leak.

let server: net.Server;
let port = 0;

before(async () => {
  server = net.createServer((socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
});

after(async () => {
  await new Promise((resolve) => server.close(resolve));
});

function connected(socket: net.Socket): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

function failed(socket: net.Socket): Promise<Error> {
  return new Promise((resolve, reject) => {
    socket.once('connect', () => reject(new Error('connected although the guard should refuse')));
    socket.once('error', resolve);
  });
}

/** Removes the guard's record of refusals this file provoked on purpose. */
function takeRefusals(): string[] {
  return guardRefused.splice(0, guardRefused.length);
}

describe('loopback-only test guard', () => {
  test('isLoopbackIp', () => {
    for (const ip of ['127.0.0.1', '127.9.9.9', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) {
      assert.equal(isLoopbackIp(ip), true, ip);
    }
    assert.equal(isLoopbackIp('::ffff:7f00:1'), true);
    for (const ip of ['10.0.0.1', '0.0.0.0', '::', '::ffff:10.0.0.1', '8.8.8.8', 'fe80::1', 'x']) {
      assert.equal(isLoopbackIp(ip), false, ip);
    }
  });

  test('sees every form of connect to a loopback address', async () => {
    await connected(net.connect(port, '127.0.0.1'));
    await connected(net.connect({ host: '127.0.0.1', port }));
    await connected(new net.Socket().connect({ host: '127.0.0.1', port }));
    await connected(new net.Socket().connect(port, '127.0.0.1'));
    await connected(net.connect({ host: 'localhost', port }));
    const lookup = (
      _hostname: string,
      options: { all?: boolean },
      callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
    ) => {
      if (options.all === true) callback(null, [{ address: '127.0.0.1', family: 4 }]);
      else callback(null, '127.0.0.1', 4);
    };
    await connected(net.connect({ host: 'localhost', port, lookup }));
    await new Promise<void>((resolve) => {
      // The server hangs up without an answer; only the connect matters here.
      const request = http.get({ host: '127.0.0.1', port, path: '/' });
      request.on('error', () => {});
      request.on('close', resolve);
    });
    assert.ok(guardSeen.filter((seen) => seen === `127.0.0.1:${port}`).length >= 5);
    assert.ok(guardSeen.includes(`localhost:${port}`));
    assert.ok(guardSeen.includes('lookup localhost -> 127.0.0.1'));
    assert.deepEqual(takeRefusals(), []);
  });

  test('refuses a non-loopback destination synchronously, however connect is called', () => {
    const refused = { message: /^loopback-only test guard: refused 0\.0\.0\.0:/ };
    assert.throws(() => net.connect(port, '0.0.0.0'), refused);
    assert.throws(() => net.connect({ host: '0.0.0.0', port }), refused);
    assert.throws(() => new net.Socket().connect({ host: '0.0.0.0', port }), refused);
    assert.throws(() => http.get({ host: '0.0.0.0', port }), refused);
    assert.equal(takeRefusals().length, 4);
  });

  test('refuses a non-loopback address that a lookup answers', async () => {
    const lookup = (
      _hostname: string,
      options: { all?: boolean },
      callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
    ) => {
      if (options.all === true) callback(null, [{ address: '0.0.0.0', family: 4 }]);
      else callback(null, '0.0.0.0', 4);
    };
    const error = await failed(net.connect({ host: 'localhost', port, lookup }));
    assert.match(error.message, /^loopback-only test guard: refused localhost -> 0\.0\.0\.0/);
    assert.equal(takeRefusals().length, 1);
  });

  test('unix socket paths pass', async () => {
    // A path that does not exist: the error must come from the OS, not the guard.
    const error = await failed(net.connect('/nonexistent/assay-guard-test.sock'));
    assert.equal((error as NodeJS.ErrnoException).code, 'ENOENT');
    assert.deepEqual(takeRefusals(), []);
  });

  test('Resolver queries (both APIs) go only to loopback name servers', async () => {
    for (const resolver of [new dns.promises.Resolver(), new dns.Resolver()]) {
      resolver.setServers(['192.0.2.53']);
      const query =
        resolver instanceof dns.promises.Resolver
          ? resolver.resolve4('example.test')
          : new Promise((resolve, reject) =>
              (resolver as dns.Resolver).resolve4('example.test', (err, answers) =>
                err === null ? resolve(answers) : reject(err),
              ),
            );
      await assert.rejects(query, /loopback-only test guard: refused DNS query resolve4/);
      assert.equal(takeRefusals().length, 1);
    }
    // A loopback server passes the guard: the error is the network's (nothing listens on port 9).
    const local = new dns.promises.Resolver({ timeout: 200, tries: 1 });
    local.setServers(['127.0.0.1:9']);
    await assert.rejects(local.resolve4('example.test'), (error: NodeJS.ErrnoException) => {
      assert.doesNotMatch(error.message, /test guard/);
      return true;
    });
    assert.deepEqual(takeRefusals(), []);
  });
});

import type { IncomingMessage, Server, ServerResponse } from 'node:http';

/**
 * `Expect: 100-continue` answered only once the service reads the body: by then the request has
 * passed authentication, the rate limits and the checks of its declared length (all of which run
 * before a route reads a byte), so a client refused with 401, 413, 429 or 503 sends no body at
 * all. Node's default sends `100 Continue` as soon as the head arrives, before any of that.
 *
 * A request refused without its body being read ends with its connection closed: the client was
 * told to wait, so what it may still send is not worth reading.
 */
export function continueWhenBodyIsRead(server: Server): void {
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    const keepAlive = response.shouldKeepAlive;
    response.shouldKeepAlive = false;
    const read = request._read.bind(request);
    let continued = false;
    request._read = (size: number) => {
      // Node also reads a request to drain it after an answer: no 100 after the final status.
      if (!continued && !response.headersSent) {
        continued = true;
        response.shouldKeepAlive = keepAlive;
        response.writeContinue();
      }
      read(size);
    };
    server.emit('request', request, response);
  });
  // Any other expectation goes to the app, which refuses it (417) in the service's shape; Node's
  // own answer is a bare 417 without the service's headers.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    server.emit('request', request, response);
  });
}

/** An error whose status code and message are meant for the client as they are. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly headers: Record<string, string> = {},
    /** What went wrong underneath, for the log. */
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
  }
}

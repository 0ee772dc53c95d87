/**
 * A part of the master that runs only while it leads. On taking office the duties start one
 * after the other, in their listed order; on leaving they are all told to stop at once, so
 * every reply, dispatch and consumer ends together, and each resolves once its work in flight
 * is over.
 */
export interface LeaderDuty {
  /** Starts the duty under the lease token `fence`. */
  takeOffice(fence: string): Promise<void>;
  /** Stops the duty: its synchronous part takes effect before the first await. */
  leaveOffice(): Promise<void>;
}

/**
 * Where a component writes its log lines, by level. A Nest `Logger` fits, so services pass
 * theirs; tests pass a plain object that collects the lines.
 */
export interface LineLogger {
  log(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { ConfigError, ConfigErrors } from './errors.js';

/** Reads one variable from the environment; throws `ConfigError` naming it when bad. */
export interface EnvField<T> {
  /** `source` is the whole environment, for a field that depends on another variable. */
  read(name: string, raw: string | undefined, source: Env): T;
  /** Human-readable description of the accepted values, for usage text. */
  readonly describe: string;
}

type Env = Record<string, string | undefined>;

/** A map from environment variable names to their field readers. */
export type EnvSpec<T> = { [K in keyof T]: readonly [variable: string, field: EnvField<T[K]>] };

function present(raw: string | undefined): raw is string {
  return raw !== undefined && raw.trim() !== '';
}

function required<T>(name: string, raw: string | undefined, fallback: T | undefined, parse: (s: string) => T): T {
  if (!present(raw)) {
    if (fallback === undefined) throw new ConfigError(name, 'is required but not set');
    return fallback;
  }
  return parse(raw.trim());
}

/** Field readers with validation; `default` makes a field optional. */
export const env = {
  string(opts: { default?: string; pattern?: RegExp } = {}): EnvField<string> {
    return {
      describe: opts.pattern ? `string matching ${opts.pattern}` : 'string',
      read: (name, raw) =>
        required(name, raw, opts.default, (s) => {
          if (opts.pattern && !opts.pattern.test(s))
            throw new ConfigError(name, `"${s}" does not match ${opts.pattern}`);
          return s;
        }),
    };
  },

  /**
   * An optional path to a file that must exist; `pairedWith` names a variable that must be set
   * with this one (a certificate and its key), the error naming both.
   */
  file(opts: { pairedWith?: string } = {}): EnvField<string | undefined> {
    return {
      describe: 'path to an existing file (optional)',
      read: (name, raw, source) => {
        if (!present(raw)) return undefined;
        const path = raw.trim();
        if (opts.pairedWith !== undefined && !present(source[opts.pairedWith])) {
          throw new ConfigError(name, `is set but ${opts.pairedWith} is not: set both`);
        }
        let isFile: boolean;
        try {
          isFile = statSync(path).isFile();
        } catch (cause) {
          throw new ConfigError(
            name,
            `${JSON.stringify(path)} cannot be read (${(cause as NodeJS.ErrnoException).code ?? 'error'})`,
            { cause },
          );
        }
        if (!isFile) throw new ConfigError(name, `${JSON.stringify(path)} is not a file`);
        return path;
      },
    };
  },
  optionalString(): EnvField<string | undefined> {
    return { describe: 'string (optional)', read: (_name, raw) => (present(raw) ? raw.trim() : undefined) };
  },

  /**
   * An optional path to a file this process can read (a key, a certificate, a credentials
   * file); the error says why one cannot be used. `content` looks at the text and returns why
   * it is wrong, if it is (never quoting it: it may be secret). The path is returned as given.
   */
  readableFile(opts: { content?: (text: string) => string | undefined } = {}): EnvField<string | undefined> {
    return {
      describe: 'path to a readable file (optional)',
      read: (name, raw) => {
        if (!present(raw)) return undefined;
        const path = raw.trim();
        let isFile: boolean;
        try {
          isFile = statSync(path).isFile();
          accessSync(path, constants.R_OK);
        } catch (cause) {
          const code = (cause as NodeJS.ErrnoException).code;
          const reason = code === 'ENOENT' ? 'does not exist' : code === 'EACCES' ? 'is not readable' : String(code);
          throw new ConfigError(name, `file "${path}" ${reason}`, { cause });
        }
        if (!isFile) throw new ConfigError(name, `"${path}" is not a file`);
        const wrong = opts.content?.(readFileSync(path, 'utf8'));
        if (wrong !== undefined) throw new ConfigError(name, `"${path}" ${wrong}`);
        return path;
      },
    };
  },

  url(opts: { default?: string; protocols: string[] }): EnvField<string> {
    return {
      describe: `URL (${opts.protocols.join(', ')})`,
      read: (name, raw) =>
        required(name, raw, opts.default, (s) => {
          const urls = s.split(',').map((u) => u.trim());
          for (const u of urls) {
            let parsed: URL;
            try {
              parsed = new URL(u);
            } catch (cause) {
              throw new ConfigError(name, `"${u}" is not a URL`, { cause });
            }
            const protocol = parsed.protocol.replace(/:$/, '');
            if (!opts.protocols.includes(protocol)) {
              throw new ConfigError(name, `"${u}" must use ${opts.protocols.map((p) => `${p}://`).join(' or ')}`);
            }
            if (!parsed.hostname) throw new ConfigError(name, `"${u}" has no host`);
          }
          return s;
        }),
    };
  },

  int(opts: { default?: number; min?: number; max?: number } = {}): EnvField<number> {
    const range = `${opts.min ?? '-inf'}..${opts.max ?? 'inf'}`;
    return {
      describe: `integer in ${range}`,
      read: (name, raw) =>
        required(name, raw, opts.default, (s) => {
          if (!/^-?\d+$/.test(s)) throw new ConfigError(name, `"${s}" is not an integer`);
          const n = Number(s);
          if ((opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max)) {
            throw new ConfigError(name, `${n} is outside ${range}`);
          }
          return n;
        }),
    };
  },

  number(opts: { default?: number; min?: number; max?: number } = {}): EnvField<number> {
    const range = `${opts.min ?? '-inf'}..${opts.max ?? 'inf'}`;
    return {
      describe: `number in ${range}`,
      read: (name, raw) =>
        required(name, raw, opts.default, (s) => {
          const n = Number(s);
          if (!Number.isFinite(n)) throw new ConfigError(name, `"${s}" is not a number`);
          if ((opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max)) {
            throw new ConfigError(name, `${n} is outside ${range}`);
          }
          return n;
        }),
    };
  },

  oneOf<T extends string>(values: readonly T[], opts: { default?: T } = {}): EnvField<T> {
    return {
      describe: values.join(' | '),
      read: (name, raw) =>
        required(name, raw, opts.default, (s) => {
          if (!(values as readonly string[]).includes(s)) {
            throw new ConfigError(name, `"${s}" must be one of ${values.join(', ')}`);
          }
          return s as T;
        }),
    };
  },
};

/**
 * A rule over several variables at once (settings that exclude or need each other); returns
 * one error per broken rule, naming the variables.
 */
export type EnvCheck = (source: Env) => ConfigError[];

/**
 * Reads every field of `spec` from `source` (default `process.env`), collecting all problems
 * before throwing one `ConfigErrors`, so a user fixes their environment in one go. `checks` add
 * the rules that span several variables.
 */
export function readConfig<T>(spec: EnvSpec<T>, source: Env = process.env, checks: readonly EnvCheck[] = []): T {
  const out = {} as T;
  const errors: ConfigError[] = [];
  for (const key of Object.keys(spec) as (keyof T)[]) {
    const [variable, field] = spec[key];
    try {
      out[key] = field.read(variable, source[variable], source);
    } catch (err) {
      if (err instanceof ConfigError) errors.push(err);
      else throw err;
    }
  }
  for (const check of checks) errors.push(...check(source));
  if (errors.length > 0) throw new ConfigErrors(errors);
  return out;
}

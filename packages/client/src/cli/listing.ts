import { paginate } from "../client.ts";

type Page<T> = { items: T[]; next_cursor: string | null };

/**
 * What an `ls` command prints: every page with `--all` (500 at a time), else the first `limit`
 * items and whether more match (the command says so on stderr).
 */
export async function listItems<T>(fetchPage: (limit: number, cursor?: string) => Promise<Page<T>>, all: boolean, limit: number): Promise<{ items: T[]; more: boolean }> {
  if (!all) {
    const page = await fetchPage(limit);
    return { items: page.items, more: page.next_cursor !== null };
  }
  const items: T[] = [];
  for await (const item of paginate((cursor) => fetchPage(500, cursor))) items.push(item);
  return { items, more: false };
}

import { svelte } from "@sveltejs/vite-plugin-svelte";
import { defineConfig } from "vitest/config";

// Tauri serves ui/dist through its own protocol under a strict CSP (see tauri.conf.json):
// no inline scripts or styles, so everything must be emitted as files.
export default defineConfig(({ mode }) => ({
  plugins: [svelte()],
  clearScreen: false,
  server: { port: 5173, strictPort: true },
  // Tests mount components in jsdom: resolve Svelte's browser build, not its server build.
  resolve: mode === "test" ? { conditions: ["browser"] } : {},
  build: {
    target: "safari16",
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    sourcemap: false,
    modulePreload: { polyfill: false },
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.ts"],
    env: { TZ: "UTC" },
  },
}));

import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["conformance.test.js"],
    testTimeout: 20000,
    hookTimeout: 20000,
    // The suite's own tests run sequentially within a file; keep one worker.
    fileParallelism: false,
  },
})

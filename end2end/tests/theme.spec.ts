import { test, expect, open } from './fixtures';

// The theme switch (system, light, dark): a plain form, so it works without JavaScript;
// the choice is remembered and overrides the browser's preference until "System".

test('the theme switch overrides the system theme and is remembered', async ({ page }, info) => {
  const js = info.project.use.javaScriptEnabled !== false;
  // The page's background, light (slate-50) or dark (slate-950), by its CIE lightness
  // (Chromium gives Tailwind's oklch colours as lab()).
  const background = () =>
    page.locator('body').evaluate((body) => {
      const lightness = Number(/^lab\(([\d.]+)/.exec(getComputedStyle(body).backgroundColor)?.[1]);
      return lightness > 90 ? 'light' : lightness < 10 ? 'dark' : `neither (${lightness})`;
    });
  const [light, dark] = ['light', 'dark'];

  await page.emulateMedia({ colorScheme: 'light' });
  await open(page, '/sign-in', js);
  await expect(page.getByRole('button', { name: 'System' })).toHaveAttribute('aria-pressed', 'true');
  expect(await background()).toBe(light);

  await page.getByRole('button', { name: 'Dark' }).click();
  await expect(page.getByRole('button', { name: 'Dark' })).toHaveAttribute('aria-pressed', 'true');
  await expect(page.locator('html')).toHaveClass('dark');
  expect(await background()).toBe(dark);
  await open(page, '/sign-in', js);
  expect(await background()).toBe(dark);

  // Light holds while the system prefers dark.
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.getByRole('button', { name: 'Light' }).click();
  await expect(page.getByRole('button', { name: 'Light' })).toHaveAttribute('aria-pressed', 'true');
  expect(await background()).toBe(light);

  // System follows the browser again.
  await page.getByRole('button', { name: 'System' }).click();
  await expect(page.getByRole('button', { name: 'System' })).toHaveAttribute('aria-pressed', 'true');
  expect(await background()).toBe(dark);
  await page.emulateMedia({ colorScheme: 'light' });
  expect(await background()).toBe(light);
});

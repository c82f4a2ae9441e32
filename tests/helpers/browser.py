"""A headless Chromium driven by selenium, for the tests that look at a page as a user's browser shows it. A
test module that imports this is skipped, with a sentence saying what to install, where selenium, Chromium or
chromedriver is missing (`.ci/run` installs them)."""

import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (the test extra has it)"
)
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip(
        "Chromium or chromedriver is not installed (Debian: apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()

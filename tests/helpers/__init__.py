"""What the tests share: helpers, fixtures and scripted servers that test modules import (`from helpers.x
import ...`; pyproject.toml puts tests/ on the path). A test module never imports another test module."""

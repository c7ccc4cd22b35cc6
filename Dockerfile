# The image deploy/kubernetes runs: the package with its entry points, and the migrations
# in /app/sql (MOWDECK_SQL_DIR), run as an unprivileged user (the gateway's pod sets root
# for CAP_SYS_NICE alone). `docker build -t mowdeck .`; compose does not use it (each of its
# containers installs the checkout at start).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY actors ./actors
COPY contracts ./contracts
COPY mowdeck ./mowdeck
COPY simulator ./simulator
COPY sql ./sql
RUN pip install --no-cache-dir . \
    && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin mowdeck
ENV MOWDECK_SQL_DIR=/app/sql \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001
CMD ["mowdeck", "--help"]

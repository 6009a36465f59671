import org.codelibs.opensearch.runner.OpenSearchRunner;
import org.opensearch.common.settings.Settings;

/** One OpenSearch node on loopback for the local stack: OpenSearchNode <home> <http port>.
 *  The runner's own main refuses HTTP ports above 9299; the transport port is http + 1. */
public class OpenSearchNode {
    public static void main(String[] args) throws Exception {
        final String home = args[0];
        final int http = Integer.parseInt(args[1]);
        final OpenSearchRunner runner = new OpenSearchRunner();
        runner.setMaxHttpPort(-1);
        runner.onBuild((number, settings) -> {
            settings.put("http.port", String.valueOf(http));
            settings.put("transport.port", String.valueOf(http + 1));
            settings.put("network.host", "127.0.0.1");
            settings.put("discovery.type", "single-node");
            settings.put("cluster.routing.allocation.disk.threshold_enabled", "false");
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try { runner.close(); } catch (Exception e) { e.printStackTrace(); }
        }));
        runner.build(OpenSearchRunner.newConfigs().basePath(home).numOfNode(1).clusterName("cdckit")
                .baseHttpPort(http - 1));
        runner.ensureYellow();
        // One node: no replica can be placed. A persistent cluster setting (as a node setting 2.19
        // ignores it), so indices created without settings are green too.
        runner.client().admin().cluster().prepareUpdateSettings()
                .setPersistentSettings(Settings.builder().put("cluster.default_number_of_replicas", 0)).get();
        System.out.println("cdckit: OpenSearch node ready on 127.0.0.1:" + http);
        while (!runner.isClosed()) Thread.sleep(1000);
    }
}
